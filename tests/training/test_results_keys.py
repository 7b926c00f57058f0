# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The results keys (`headsel_recipes.results_keys`): what `TaskMetrics` writes, the readers read back."""

from __future__ import annotations

import json

from headsel_recipes.metrics import TaskMetrics
from headsel_recipes.results_keys import (
    POOLED,
    Score,
    group_scores,
    interval_keys,
    is_interval_key,
    loss_key,
    one_group,
    read_metrics,
    read_results,
    read_score,
    results_path,
    score_key,
)


def test_key_format():
    assert score_key("bleu") == "bleu"
    assert score_key("bleu", "en-de") == "bleu_en-de"
    assert score_key("wer", POOLED, split="predict") == "predict_wer_pooled"
    assert score_key("wer", split="eval") == "eval_wer"
    assert interval_keys("eval_bleu_fr") == ("eval_bleu_fr_ci_low", "eval_bleu_fr_ci_high")
    assert is_interval_key("eval_bleu_fr_ci_high") and not is_interval_key("eval_bleu_fr")
    assert loss_key("predict") == "predict_loss"


def test_the_writer_s_scores_read_back_per_group_with_intervals():
    references = ["the cat sat on the mat", "a dog", "le chat", "un chien noir"]
    hypotheses = ["the cat sat on a mat", "a dog", "le chat", "un chien"]
    written = TaskMetrics(None, "bleu", bootstrap_resamples=50).scores(references, hypotheses, ["en", "en", "fr", "fr"])
    results = {f"predict_{key}": value for key, value in written.items()}  # the Trainer's prefix
    results["predict_loss"] = 1.5

    groups = group_scores(results, "bleu", "predict")
    assert list(groups) == ["en", "fr"]  # neither the mean nor the pooled score
    for group, score in groups.items():
        assert score.value == written[f"bleu_{group}"]
        assert score.interval == (written[f"bleu_{group}_ci_low"], written[f"bleu_{group}_ci_high"])
    mean = read_score(results, score_key("bleu", split="predict"))
    assert mean.value == written["bleu"] and mean.interval is not None
    assert read_score(results, score_key("bleu", POOLED, split="predict")).value == written["bleu_pooled"]
    assert read_score(results, "predict_chrf") is None
    assert read_score({"eval_bleu": 3}, "eval_bleu") == Score(3.0)  # no interval without both bounds
    assert read_score({"eval_bleu": 3, "eval_bleu_ci_low": 2}, "eval_bleu") == Score(3.0)  # nor with one
    assert group_scores(results, "bleu", "eval") == {}


def test_result_files_merge_and_one_group_is_renamed(tmp_path):
    (tmp_path / "all_results.json").write_text(json.dumps({"eval_bleu": 1.0, "eval_bleu_fr": 2.0}))
    (tmp_path / "predict_results.json").write_text(json.dumps({"predict_bleu_fr": 4.0, "predict_bleu_fr_ci_low": 3.0}))
    (tmp_path / "eval_results.json").write_text(json.dumps({"eval_bleu": 5.0}))  # later files win
    metrics = read_metrics(tmp_path)
    assert metrics == {"eval_bleu": 5.0, "eval_bleu_fr": 2.0, "predict_bleu_fr": 4.0, "predict_bleu_fr_ci_low": 3.0}
    assert one_group(metrics, "fr") == {"eval_bleu": 2.0, "predict_bleu": 4.0}
    # a group whose name ends another's (`news`, `tech_news`), or names an interval bound (`low`), gets its own only:
    # an exported card showed the other group's score as a row of its own
    domains = {"predict_bleu_news": 20.0, "predict_bleu_tech_news": 40.0, "predict_bleu_ci_low": 1.0}
    assert one_group(domains, "news") == {"predict_bleu": 20.0}
    assert one_group(domains, "low") == {}
    assert read_metrics(tmp_path / "missing") == {}
    assert results_path(tmp_path, "predict").name == "predict_results.json"
    assert read_results(tmp_path, "predict")["predict_bleu_fr"] == 4.0
