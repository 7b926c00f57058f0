"""Whether runs trained again reproduce the scores an experiment recorded: every per-task score of every seed of
every system that has runs in the folder, against the recorded `results.json`.

    python benchmarks/results/quality/baselines/reproduce_check.py benchmarks/results/quality/baselines/asr.yaml \
        benchmarks/results/quality/baselines/asr_results.json
"""

import json
import sys

from headsel_recipes.experiment import collect_scores, load_experiment

experiment = load_experiment(sys.argv[1])
recorded = json.load(open(sys.argv[2]))
metric = recorded["metric"]
for name, entry in collect_scores(experiment, metric).items():
    for seed, scores in entry.seeds.items():
        before = recorded["systems"].get(name, {}).get("seeds", {}).get(str(seed))
        if before is None:
            print(f"{name}, seed {seed}: new (nothing recorded)")
            continue
        differ = {task: (before["scores"].get(task), score) for task, score in scores.groups.items()
                  if before["scores"].get(task) != score}
        print(f"{name}, seed {seed}: {'equal' if not differ else f'DIFFERENT {differ}'} "
              f"({len(scores.groups)} {metric.upper()} scores)")
