"""Score a shared Marian checkpoint on the dev split (en->x), as ship_checkpoint scores test; an optional third argument overrides generation_max_length."""
import json, sys, time, glob
from pathlib import Path
from headsel_recipes.demo import run_recipe, read_predictions, prediction_quality
model, out = sys.argv[1], sys.argv[2]
recipe = json.load(open("training/demo_checkpoint/o2m_shared.json"))
dev = ["data/offline_corpus/mt/dev_en_*.jsonl"]
rows = [json.loads(l) for p in dev for f in sorted(glob.glob(p)) for l in open(f) if l.strip()]
flags = {k: recipe[k] for k in ("task_type", "target_lang_token", "max_source_length", "max_target_length",
                                  "generation_num_beams", "generation_max_length", "per_device_eval_batch_size", "use_cpu")}
if len(sys.argv) > 3: flags["generation_max_length"] = int(sys.argv[3])
flags.update(test_file=dev, output_dir=out, model_name_or_path=model, shared_baseline=True, do_predict=True,
             bootstrap_resamples=0, disable_tqdm=True, log_level="warning",
             encoder_tasks=sorted({r["source_lang"] for r in rows}), decoder_tasks=sorted({r["target_lang"] for r in rows}))
t = time.time()
res = run_recipe(flags)
q = prediction_quality(read_predictions(Path(out) / "generated_predictions.jsonl"))
rec = {"model": model, "generation_max_length": flags["generation_max_length"], "split": "dev", "sentences": len(rows), "predict_loss": res.metrics["predict"]["predict_loss"],
       "bleu": res.metrics["predict"].get("predict_bleu"), "quality": q, "seconds": round(time.time() - t)}
Path(out, "dev_record.json").write_text(json.dumps(rec, indent=1))
print(json.dumps(rec), flush=True)
