# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""The recipe metrics (`headsel_recipes.metrics`): corpus statistics and their bootstrap confidence intervals."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pytest
import sacrebleu
from recipe_testkit import text_rows
from transformers import EvalPrediction

from headsel_recipes.metrics import (
    TaskMetrics,
    bleu_statistics,
    bootstrap_interval,
    bootstrap_sums,
    corpus_bleu,
    corpus_wer,
    is_unusable,
    normalize_for_wer,
    percentile_interval,
    prediction_quality,
    unusable_share,
    wer_statistics,
)
from headsel_recipes.tokenizer import train_marian_tokenizer


def noisy_corpus(size: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """References and hypotheses with about 30% of the words replaced."""
    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    references = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(size)]
    hypotheses = [" ".join(w if rng.random() < 0.7 else rng.choice(words) for w in ref.split()) for ref in references]
    return references, hypotheses


@pytest.mark.parametrize("metric", ["wer", "bleu"])
def test_bootstrap_interval_contains_the_score_and_narrows_with_more_sentences(metric):
    widths = []
    for size in (50, 200, 800):
        references, hypotheses = noisy_corpus(size)
        if metric == "wer":
            stats, point = wer_statistics(references, hypotheses), corpus_wer(references, hypotheses)
        else:
            stats, point = bleu_statistics(references, hypotheses), corpus_bleu(references, hypotheses)
        low, high = bootstrap_interval(stats, metric, resamples=1000)
        assert low < point < high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4.0, rel=0.35)  # width ~ 1 / sqrt(sentences)


def test_statistics_reproduce_the_corpus_scores():
    import jiwer

    references, hypotheses = noisy_corpus(60, seed=5)
    hypotheses[3] = ""
    assert corpus_bleu(references, hypotheses) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    output = jiwer.process_words(references, hypotheses)
    expected = (output.substitutions + output.deletions + output.insertions) / (
        output.substitutions + output.deletions + output.hits)
    assert corpus_wer(references, hypotheses) == pytest.approx(100 * expected)


def test_task_metrics_add_intervals_per_group_mean_and_pooled():
    references, hypotheses = noisy_corpus(120, seed=2)
    groups = ["de" if i % 3 else "fr" for i in range(120)]
    plain = TaskMetrics(None, "bleu").scores(references, hypotheses, groups)
    with_ci = TaskMetrics(None, "bleu", bootstrap_resamples=300).scores(references, hypotheses, groups)
    assert {k: v for k, v in with_ci.items() if "_ci_" not in k} == plain  # the existing keys are unchanged
    for key in ("bleu_de", "bleu_fr", "bleu", "bleu_pooled"):
        assert with_ci[f"{key}_ci_low"] <= with_ci[key] <= with_ci[f"{key}_ci_high"]
    # the mean over two groups is more certain than the smaller group alone
    assert (with_ci["bleu_ci_high"] - with_ci["bleu_ci_low"]) < (with_ci["bleu_fr_ci_high"] - with_ci["bleu_fr_ci_low"])
    assert TaskMetrics(None, "bleu", bootstrap_resamples=300).scores(references, hypotheses, groups) == with_ci
    with pytest.raises(ValueError, match="bootstrap_resamples"):
        TaskMetrics(None, "wer", bootstrap_resamples=-1)
    with pytest.raises(ValueError, match="metric must be 'wer' or 'bleu', got 'chrf'"):
        TaskMetrics(None, "chrf")


def test_task_metrics_refuse_predictions_of_another_split():
    """Scores are matched with the references and tasks `use()` was given: a prediction count that does not fit
    (the split scored is not the one set up) is an error, not a score of misaligned pairs."""
    rows = text_rows(20, seed=0)
    tokenizer = train_marian_tokenizer([row["source"] for row in rows] + [row["target"] for row in rows],
                                       vocab_size=60)
    metrics = TaskMetrics(tokenizer, "bleu")
    metrics.use(["de", "de", "fr"], ["the cat", "a dog", "die katze"])
    ids = np.array(tokenizer(text_target=["the cat", "a dog"], padding=True).input_ids)
    with pytest.raises(ValueError, match=r"2 predictions for 3 references: call TaskMetrics.use\(\) with the split"):
        metrics(EvalPrediction(predictions=ids, label_ids=None))
    # predictions as the Trainer hands them when the model returns more than the generated ids: a tuple
    metrics.use(["de", "de"], ["the cat", "a dog"])
    scores = metrics(EvalPrediction(predictions=(ids, np.zeros((2, 1))), label_ids=None))
    assert metrics.last_hypotheses == ["the cat", "a dog"] and "bleu_de" in scores


def test_prediction_quality_of_no_predictions_is_an_error():
    with pytest.raises(ValueError, match="no predictions to score"):
        prediction_quality([])


def test_unusable_hypotheses_are_empty_or_looping():
    """What the GPU runs of session 32 wrote when their model had not learned: nothing, or one word over and over."""
    for hypothesis in ["", "   ", "Ftttttttttt", "لا لا لا لا لا", "the cat sat sat sat sat down"]:
        assert is_unusable(hypothesis), hypothesis
    for hypothesis in ["Le chat est assis.", "no no no", "la lala la la", "ab ab ab abc", "Bonjour !!!"]:
        assert not is_unusable(hypothesis), hypothesis
    assert unusable_share(["", "Le chat.", "x x x x", "Hallo Welt"]) == 0.5
    assert unusable_share([]) == 0.0


def test_prediction_quality_reports_the_references_own_degenerate_share():
    # a format string or a long number holds a run of 6 identical characters in the reference too: a system that
    # reproduces every reference reads that share, the floor of the `degenerate` column
    rows = [{"group": "en-de", "reference": "Zeit [.uuuuuu]", "prediction": "Zeit [.uuuuuu]"},
            {"group": "en-de", "reference": "Es kostet 1000000 Euro.", "prediction": "Es kostet 1000000 Euro."},
            {"group": "en-fr", "reference": "Bonjour", "prediction": "Bonnnnnnnjour"},
            {"group": "en-fr", "reference": "Merci", "prediction": "Merci"}]
    quality = prediction_quality(rows)
    assert quality["degenerate"] == 0.75 and quality["degenerate_references"] == 0.5


def test_scores_compare_the_text_the_tokenizer_can_write():
    """The recipes' sentencepiece tokenizers write NFKC: a hypothesis equal to its reference up to Unicode
    normalisation is perfect. WER (a normalised score) reads NFKC; BLEU and chrF read NFC, as sacrebleu keeps
    compatibility forms."""
    composed = unicodedata.normalize("NFC", "le café est très bon ce matin")
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    pairs = ((decomposed, composed), ("10 m²", "10 m2"), ("\ufb01n de la \ufb01lière", "fin de la filière"),
             ("ＡＢＣ est là", "ABC est là"))
    for reference, hypothesis in pairs:
        assert corpus_wer([reference], [hypothesis]) == 0.0
    assert corpus_bleu([decomposed], [composed]) == pytest.approx(100.0)
    row = {"group": "fr", "reference": decomposed, "prediction": composed}
    assert prediction_quality([row])["chrf"] == pytest.approx(100.0)


def test_wer_drops_every_kind_of_punctuation_and_counts_words_against_empty_references():
    # dashes, quotes and brackets are punctuation too (Unicode P*), not only `Po`; a hypothesis for an empty
    # reference is all insertions, not free
    assert normalize_for_wer("«State-of-the-art» (models)…") == "stateoftheart models"
    assert corpus_wer(["", "a b"], ["x y", "a b"]) == 100.0  # 2 insertions / 2 reference words


def test_bleu_is_sacrebleus_with_its_tokenizer_and_smoothing():
    references, hypotheses = ["我喜欢吃苹果和香蕉"], ["我喜欢吃苹果"]  # --bleu_tokenize zh: no spaces to split at
    assert corpus_bleu(references, hypotheses, "zh") == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh").score)
    references, hypotheses = ["the cat sat on the mat today"], ["the cat on mat sat today"]  # no 4-gram: smoothed
    assert corpus_bleu(references, hypotheses) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def test_chrf_is_sacrebleus_default_chrf():
    rows = [{"group": "x", "reference": "the cat sat on the mat", "prediction": "the cat sat on a mat"}]
    expected = sacrebleu.corpus_chrf(["the cat sat on a mat"], [["the cat sat on the mat"]]).score
    assert prediction_quality(rows)["chrf"] == round(expected, 2)


def test_bootstrap_resamples_every_sentence_and_reports_the_central_95_percent():
    assert percentile_interval(np.arange(1001.0)) == pytest.approx((25.0, 975.0))
    sums = bootstrap_sums(np.array([[0, 1], [0, 1], [10, 1]]), 4000, np.random.default_rng(0))
    assert (sums[:, 1] == 3).all()  # as many sentences as there are, drawn with replacement
    assert sums[:, 0].mean() == pytest.approx(10.0, rel=0.05)  # the last one drawn once per resample on average


def test_decoding_drops_special_tokens_and_the_trainers_padding():
    rows = text_rows(20, seed=0)
    tokenizer = train_marian_tokenizer([row["source"] for row in rows] + [row["target"] for row in rows],
                                       vocab_size=60)
    ids = tokenizer(text_target=["the cat", "die katze rennt"], padding=True).input_ids
    ids = np.array([row + [-100, -100] for row in ids])  # the Trainer pads batches of other widths with -100
    assert TaskMetrics(tokenizer, "bleu").decode(ids) == ["the cat", "die katze rennt"]


def test_the_task_score_is_the_mean_over_groups():
    # the paper averages languages: with three groups the median (the middle one) would differ
    scores = TaskMetrics(None, "wer").scores(["a b"] * 3, ["a b", "a b", "x y"], ["g1", "g2", "g3"])
    assert scores["wer"] == pytest.approx(100 / 3, abs=0.01)
