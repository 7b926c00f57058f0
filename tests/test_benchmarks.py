"""The benchmark scripts still run and still check what they compare (no timing is asserted: timings belong in
`benchmarks/`, measured by hand)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import overhead  # noqa: E402


def test_overhead_quick_run_checks_the_all_candidates_baseline(tmp_path, capsys):
    out = tmp_path / "overhead.json"
    overhead.main(["--quick", "--only", "train step, single", "--json", str(out)])
    report = json.loads(out.read_text())
    # the all-candidates attention computes exactly what head selection computes, in eval and in training
    assert report["equivalence"]["train_gradients_checked"] > 0
    assert report["equivalence"]["eval_mixed_max_abs_diff"] < 1e-5
    assert [result["name"] for result in report["results"]] == ["train step, single-task"]
    assert report["results"][0]["name"] in overhead.measurement_names(overhead.BenchConfig())
    assert "train step, single-task" in capsys.readouterr().out


def test_overhead_only_must_match_a_measurement(monkeypatch):
    # refused before any model is built
    monkeypatch.setattr(overhead, "build_models", lambda *args: pytest.fail("built models for a bad --only"))
    with pytest.raises(SystemExit, match="matches no measurement"):
        overhead.main(["--quick", "--only", "no such measurement"])
