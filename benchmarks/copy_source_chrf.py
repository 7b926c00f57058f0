"""What copying the English source scores on `make demo`'s test set: the floor a translation model has to pass.

Many words of the demo's software-interface strings (names, placeholders, `URL`, `HTML`) are the same in every
language, so an output that is the English source unchanged already earns chrF. This scores that output with the
demo's own scorer (`prediction_quality`: chrF pooled, per direction and their mean) on the demo's own test files.

    python benchmarks/copy_source_chrf.py [--corpus_dir data/offline_corpus] [--output FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from headsel_recipes.demo import corpus_files
from headsel_recipes.metrics import prediction_quality
from offline_corpus import LANGUAGES


def copy_rows(corpus_dir: Path) -> list[dict]:
    """One prediction row per test pair of the demo (English -> each language, every domain): the source as the
    prediction, grouped by direction as the demo groups its predictions."""
    rows = []
    for lang in LANGUAGES:
        files = corpus_files(corpus_dir, "test", lang)
        if not files:
            raise FileNotFoundError(f"no test_en_{lang}_*.jsonl under {corpus_dir / 'mt'}: run `make corpus` first")
        for path in files:
            for line in path.read_text(encoding="utf-8").splitlines():
                pair = json.loads(line)
                rows.append({"group": f"en-{lang}", "reference": pair["target"], "prediction": pair["source"]})
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus_dir", type=Path, default=Path("data/offline_corpus"))
    parser.add_argument("--output", type=Path, help="also write the scores here as JSON")
    args = parser.parse_args(argv)
    rows = copy_rows(args.corpus_dir)
    scores = {"test_sentences": len(rows), **prediction_quality(rows)}
    text = json.dumps(scores, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    return scores


if __name__ == "__main__":
    main()
