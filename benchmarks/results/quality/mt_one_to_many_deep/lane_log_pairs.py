# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Systems paired by seed from an experiment's lane logs, for parts of one experiment run in different sessions whose
run folders are not all kept (session 71: the depth dropout controls, seeds 1-3 in session 70, seeds 4-5 in 71).

Every run a lane log trained is read by `lane_logs.read_scores` (a run found twice must have the same scores). Each
pair compares two runs of one seed; runs of one seed trained in one session pair as `quality_tables.py` pairs run
folders.

    python benchmarks/results/quality/mt_one_to_many_deep/lane_log_pairs.py "LOGS_GLOB" --pair SYSTEM REFERENCE ...

Needs `benchmarks/` on `PYTHONPATH` (lane_logs.py, and quality_tables.py's paired cells).
"""

from __future__ import annotations

import argparse

from lane_logs import matching_logs, read_scores
from quality_tables import paired_cells


def pairs_table(scores: dict[tuple[str, int], dict[str, float]], pairs: list[tuple[str, str]]) -> str:
    """A Markdown table: each `(system, reference)` one row, the system minus the reference over the seeds both have,
    mean ± std of the differences, the seeds where the system is better, and the test loss difference seed by seed.
    The unusable share is paired over the seeds whose logs printed it for both (none before session 32: "–")."""
    lines = ["Each system minus its reference, paired by seed over the lane logs (mean ± std of the differences; "
             "*ahead* counts the seeds where the system is better)", "",
             "| System minus reference (run folders) | seeds | test loss | ahead | by seed | unusable % | ahead |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for system, reference in pairs:
        seeds = sorted(seed for name, seed in scores if name == system and (reference, seed) in scores)
        if not seeds:
            raise ValueError(f"no seed has runs of both {system!r} and {reference!r}; the systems found are "
                             f"{sorted({name for name, _ in scores})}")
        cells = [*paired_score_cells(scores, system, reference, seeds, "loss", 3),
                 *paired_score_cells(scores, system, reference, seeds, "unusable", 1)]
        by_seed = " / ".join(f"{scores[(system, seed)]['loss'] - scores[(reference, seed)]['loss']:+.3f} ({seed})"
                             for seed in seeds)
        lines.append(f"| {system} − {reference} | {len(seeds)} | {cells[0]} | {cells[1]} | {by_seed} | "
                     f"{cells[2]} | {cells[3]} |")
    return "\n".join(lines) + "\n"


def paired_score_cells(scores: dict[tuple[str, int], dict[str, float]], system: str, reference: str,
                       seeds: list[int], key: str, digits: int) -> tuple[str, str]:
    """`paired_cells` of score `key` over those of `seeds` where both runs have it; `("–", "–")` where none has."""
    have = [seed for seed in seeds if key in scores[(system, seed)] and key in scores[(reference, seed)]]
    if not have:
        return "–", "–"
    return paired_cells([scores[(system, seed)][key] for seed in have],
                        [scores[(reference, seed)][key] for seed in have], digits, higher_is_better=False)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", help="lane logs, or glob patterns of them")
    parser.add_argument("--pair", nargs=2, action="append", required=True, metavar=("SYSTEM", "REFERENCE"),
                        help="SYSTEM minus REFERENCE (run folder names), paired by seed; repeat it for more rows")
    args = parser.parse_args(argv)
    logs = matching_logs(args.logs)
    if not logs:
        parser.error(f"no lane log matches {args.logs}")
    table = pairs_table(read_scores(logs), [tuple(pair) for pair in args.pair])
    print(table, end="")
    return table


if __name__ == "__main__":
    main()
