"""Dev loss (label-smoothed, as the recipe's predict_loss) of shared Marian checkpoints, no generation."""
import json, sys, glob
from headsel_recipes.demo import run_recipe
recipe = json.load(open("training/demo_checkpoint/o2m_shared.json"))
dev = ["data/offline_corpus/mt/dev_en_*.jsonl"]
rows = [json.loads(l) for p in dev for f in sorted(glob.glob(p)) for l in open(f) if l.strip()]
for model in sys.argv[1:]:
    flags = {k: recipe[k] for k in ("task_type", "target_lang_token", "max_source_length", "max_target_length",
                                      "per_device_eval_batch_size", "use_cpu")}
    flags.update(test_file=dev, output_dir="/tmp/ckpt_do/devloss", model_name_or_path=model, shared_baseline=True,
                 do_predict=True, predict_with_generate=False, bootstrap_resamples=0, disable_tqdm=True,
                 log_level="warning", encoder_tasks=sorted({r["source_lang"] for r in rows}),
                 decoder_tasks=sorted({r["target_lang"] for r in rows}))
    res = run_recipe(flags)
    print("DEVLOSS", model, round(res.metrics["predict"]["predict_loss"], 4), flush=True)
