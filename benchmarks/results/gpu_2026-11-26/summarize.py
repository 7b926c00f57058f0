"""The table of README.md in this folder: headsel / stock (median ratio, and the paired median with its 95 %
interval) of every overhead.py run here, against the GPU targets of the GPU issue (single-task inference <= 1.05,
mixed-task inference <= 1.15, training step <= 1.15). Run: python benchmarks/results/gpu_2026-11-26/summarize.py"""

import json
from pathlib import Path

HERE = Path(__file__).parent
RUNS = [  # (label, file)
    ("Marian, paper, batch 16", "call_a/overhead_marian_paper_b16.json"),
    ("Marian, paper, batch 128", "call_b/overhead_marian_paper_b128.json"),
    ("Marian, all, batch 16", "call_b/overhead_marian_all_b16.json"),
    ("Marian, all, batch 128 (4 repeats)", "call_c/overhead_marian_all_b128.json"),
    ("Speech2Text, paper, batch 16", "call_c/overhead_s2t_paper_b16.json"),
]


def gpu_target(name: str) -> float:
    if name.startswith("train step"):
        return 1.15
    return 1.05 if name.endswith("single-task") else 1.15


def main() -> None:
    names = [r["name"] for r in json.loads((HERE / RUNS[0][1]).read_text())["results"]]
    print("| measurement (target) | " + " | ".join(label for label, _ in RUNS) + " |")
    print("|---|" + "---:|" * len(RUNS))
    reports = [{r["name"]: r for r in json.loads((HERE / path).read_text())["results"]} for _, path in RUNS]
    for name in names:
        cells = []
        for report in reports:
            r = report[name]
            paired = r["ratio_paired"]["headsel"]
            mark = "" if r["ratio_median"]["headsel"] <= gpu_target(name) else " **x**"
            cells.append(f"{r['ratio_median']['headsel']:.3f}{mark} ({paired['median']:.2f} "
                         f"[{paired['low']:.2f}, {paired['high']:.2f}])")
        print(f"| {name} (<= {gpu_target(name):.2f}) | " + " | ".join(cells) + " |")
    print("\nall-candidates / stock, training step (median): " + "; ".join(
        f"{label}: single {report['train step, single-task']['ratio_median']['all_candidates']:.2f}, mixed "
        f"{report['train step, mixed-task']['ratio_median']['all_candidates']:.2f}"
        for (label, _), report in zip(RUNS, reports)))


if __name__ == "__main__":
    main()
