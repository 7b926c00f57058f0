# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Scores per task and averaged: WER (jiwer; lower-cased, punctuation removed, as the paper scores ASR) and BLEU
(sacrebleu, detokenized references), with bootstrap 95% confidence intervals. Nothing is fetched from the Hub.

[`TaskMetrics`] is the Trainer's `compute_metrics`. It knows, for the split being scored, each example's group (its
language, direction or domain) and raw reference text, in dataset order (the order the Trainer's sequential
evaluation returns predictions in, also across processes). It returns `{metric}` (the mean over groups, as the
paper averages languages), `{metric}_{group}` for every group and `{metric}_pooled` (one corpus-level score); with
`bootstrap_resamples > 0` also `{key}_ci_low` / `{key}_ci_high` for each of them. The keys: [`results_keys`].

Both metrics are corpus-level ratios of sums of per-sentence statistics (WER: edits / reference words; BLEU: n-gram
matches and totals, hypothesis and reference lengths). The statistics are computed once per sentence; a score is a
function of their sum, so a bootstrap resample (sentences drawn with replacement) costs a weighted sum, not a new
pass of the metric over strings.
"""

from __future__ import annotations

import re
import unicodedata

import jiwer
import numpy as np
from sacrebleu.metrics import BLEU, CHRF

from .results_keys import POOLED, interval_keys, score_key, unusable_key

WHITESPACE = re.compile(r"\s+")
# A hypothesis with a run of 6+ identical characters ("Ftttttttttt"): the decoder looping, not a translation.
DEGENERATE_RUN = re.compile(r"(.)\1{5,}")
# The same word 4+ times in a row ("la la la la"): the decoder looping over words.
LOOPING_WORDS = re.compile(r"(?<!\S)(\S+)(?:\s+\1){3,}(?!\S)")
# From this share of unusable hypotheses on, a run has not learned its task: its BLEU or WER compares nothing.
UNLEARNED_SHARE = 0.5
# From this many nats per token more on training examples in evaluation mode than in training mode, a trained model
# works only with its training-time noise. Of 82 saved MT benchmark runs (32 test pairs of three directions each,
# benchmarks/results/quality/mt_one_to_many_deep/collapse.py), 79 score 0.01-0.32 nats better in evaluation mode;
# the three that work only with dropout on (6 + 6-layer post-norm models) score 1.6-2.5 nats worse.
NOISE_DEPENDENCE_NATS = 0.5
BOOTSTRAP_SEED = 12345  # sacrebleu's default seed for its own bootstrap
CONFIDENCE = 0.95
RESAMPLE_CHUNK_CELLS = 2_000_000  # resamples x sentences drawn per chunk (bounds the memory of the index matrix)


def normalize_for_wer(text: str) -> str:
    """NFKC (the form the recipes' sentencepiece tokenizers write: `ﬁ` -> `fi`, `m²` -> `m2`, accents composed),
    lower-case, drop punctuation (every Unicode `P*` character), collapse whitespace."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(char for char in text.lower() if not unicodedata.category(char).startswith("P"))
    return WHITESPACE.sub(" ", text).strip()


# ---- per-sentence statistics and the scores computed from their sums -----------------------------------------------


def wer_statistics(references: list[str], hypotheses: list[str]) -> np.ndarray:
    """`[sentences, 2]`: word edits (substitutions + deletions + insertions) and reference words of every sentence,
    after [`normalize_for_wer`]. An empty (normalized) reference counts every hypothesis word as an insertion."""
    references = [normalize_for_wer(text) for text in references]
    hypotheses = [normalize_for_wer(text) for text in hypotheses]
    stats = np.zeros((len(references), 2), dtype=np.int64)
    scored = [index for index, reference in enumerate(references) if reference]
    for index in set(range(len(references))) - set(scored):  # jiwer refuses empty references
        stats[index, 0] = len(hypotheses[index].split())
    if scored:
        output = jiwer.process_words([references[i] for i in scored], [hypotheses[i] for i in scored])
        for index, chunks in zip(scored, output.alignments):
            for chunk in chunks:
                ref_words = chunk.ref_end_idx - chunk.ref_start_idx
                if chunk.type in ("substitute", "delete"):
                    stats[index, 0] += ref_words
                elif chunk.type == "insert":
                    stats[index, 0] += chunk.hyp_end_idx - chunk.hyp_start_idx
                stats[index, 1] += ref_words if chunk.type != "insert" else 0
    return stats


def wer_from_statistics(summed: np.ndarray) -> np.ndarray:
    """WER in percent from summed `[..., 2]` statistics (edits, reference words)."""
    summed = np.asarray(summed, dtype=np.float64)
    return 100.0 * summed[..., 0] / np.maximum(summed[..., 1], 1.0)


def canonical(texts: list[str]) -> list[str]:
    """The texts in Unicode NFC: canonically equal text (an accent composed or written as a combining mark) scores
    equal. Compatibility forms (`…`, `ﬁ`) are kept, as sacrebleu keeps them."""
    return [unicodedata.normalize("NFC", text) for text in texts]


def bleu_statistics(references: list[str], hypotheses: list[str], tokenize: str = "13a") -> np.ndarray:
    """`[sentences, 2 + 2 * 4]`: sacrebleu's sufficient statistics of every sentence (hypothesis length, reference
    length, n-gram matches for n = 1..4, n-gram totals for n = 1..4), both sides [`canonical`]."""
    if not references:
        return np.zeros((0, 10), dtype=np.int64)
    # sacrebleu's own bootstrap reads the same per-sentence statistics (there is no public accessor)
    statistics = BLEU(tokenize=tokenize)._extract_corpus_statistics(canonical(hypotheses), [canonical(references)])
    return np.asarray(statistics, dtype=np.int64)


def bleu_from_statistics(summed: np.ndarray) -> np.ndarray:
    """Corpus BLEU (sacrebleu's defaults: exponential smoothing, 4-grams) from summed `[..., 10]` statistics."""
    summed = np.asarray(summed)
    flat = summed.reshape(-1, summed.shape[-1])
    scores = [
        BLEU.compute_bleu(correct=row[2:6].tolist(), total=row[6:10].tolist(), sys_len=int(row[0]),
                          ref_len=int(row[1]), smooth_method="exp").score
        for row in flat
    ]
    return np.asarray(scores, dtype=np.float64).reshape(summed.shape[:-1])


def corpus_wer(references: list[str], hypotheses: list[str]) -> float:
    """Word error rate in percent over a corpus (edits / reference words), after [`normalize_for_wer`]."""
    return float(wer_from_statistics(wer_statistics(references, hypotheses).sum(axis=0)))


def corpus_bleu(references: list[str], hypotheses: list[str], tokenize: str = "13a") -> float:
    """sacrebleu corpus BLEU."""
    return float(bleu_from_statistics(bleu_statistics(references, hypotheses, tokenize).sum(axis=0)))


# ---- bootstrap ---------------------------------------------------------------------------------------------------


def bootstrap_sums(stats: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`[resamples, stats]`: the summed statistics of `resamples` bootstrap resamples of the sentences (drawn with
    replacement, as many as there are)."""
    count = len(stats)
    if count == 0:
        return np.zeros((resamples, stats.shape[-1]), dtype=stats.dtype)
    chunk = max(1, RESAMPLE_CHUNK_CELLS // count)
    sums = []
    for start in range(0, resamples, chunk):
        indices = rng.integers(0, count, size=(min(chunk, resamples - start), count))
        sums.append(stats[indices].sum(axis=1))
    return np.concatenate(sums)


def percentile_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central `confidence` interval of bootstrap `samples` (percentile method)."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_interval(stats: np.ndarray, metric: str, resamples: int = 1000,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Bootstrap 95% interval of a corpus score from per-sentence `stats` ([`wer_statistics`] or
    [`bleu_statistics`]); `metric` is `"wer"` or `"bleu"`."""
    sums = bootstrap_sums(np.asarray(stats), resamples, np.random.default_rng(seed))
    return percentile_interval(score_statistics(metric, sums))


def score_statistics(metric: str, summed: np.ndarray) -> np.ndarray:
    """`metric` (`"wer"` or `"bleu"`) from summed statistics (any leading shape)."""
    return wer_from_statistics(summed) if metric == "wer" else bleu_from_statistics(summed)


# ---- the Trainer's compute_metrics ---------------------------------------------------------------------------------


class TaskMetrics:
    """`compute_metrics` for `Seq2SeqTrainer` with `predict_with_generate`, scored per group.

    Call [`~TaskMetrics.use`] with the split's groups and references before evaluating or predicting on it.
    The decoded hypotheses of the last call stay in `last_hypotheses`; beside the scores it returns `unusable`, the
    share of empty or looping hypotheses ([`unusable_share`]).

    Args:
        tokenizer: decodes the generated ids.
        metric: `"wer"` or `"bleu"`.
        bleu_tokenize: sacrebleu's tokenizer.
        bootstrap_resamples: resamples of the bootstrap confidence intervals (0: no intervals). The sentences of
            each group are resampled independently, with a fixed seed; the interval of the mean over groups is the
            interval of the mean of the groups' resampled scores.
    """

    def __init__(self, tokenizer, metric: str, bleu_tokenize: str = "13a", bootstrap_resamples: int = 0):
        if metric not in ("wer", "bleu"):
            raise ValueError(f"metric must be 'wer' or 'bleu', got {metric!r}")
        if bootstrap_resamples < 0:
            raise ValueError(f"bootstrap_resamples must be >= 0 (0: no intervals), got {bootstrap_resamples}")
        self.tokenizer, self.metric, self.bleu_tokenize = tokenizer, metric, bleu_tokenize
        self.bootstrap_resamples = bootstrap_resamples
        self.groups: list[str] = []
        self.references: list[str] = []
        self.label_lengths: np.ndarray | None = None
        self.last_hypotheses: list[str] = []

    def use(self, groups: list[str], references: list[str], label_lengths: list[int] | None = None) -> None:
        """Score the next evaluation against these (one entry per example, in dataset order). With the label
        lengths of the examples, the order of the predictions is checked against them."""
        self.groups, self.references = list(groups), list(references)
        self.label_lengths = None if label_lengths is None else np.asarray(label_lengths)

    def check_order(self, label_ids) -> None:
        """Raise if the gathered labels are not the split's, in order (a misaligned distributed evaluation)."""
        if self.label_lengths is None or label_ids is None:
            return
        label_ids = np.asarray(label_ids)[: len(self.references)]
        lengths = ((label_ids != -100) & (label_ids != self.tokenizer.pad_token_id)).sum(axis=-1)
        if lengths.shape != self.label_lengths.shape or (lengths != self.label_lengths).any():
            raise ValueError("the evaluated examples are not the split's examples in order: predictions cannot be "
                             "matched with their references and tasks")

    def statistics(self, references: list[str], hypotheses: list[str]) -> np.ndarray:
        """Per-sentence statistics of this metric."""
        if self.metric == "wer":
            return wer_statistics(references, hypotheses)
        return bleu_statistics(references, hypotheses, self.bleu_tokenize)

    def decode(self, token_ids) -> list[str]:
        if isinstance(token_ids, tuple):
            token_ids = token_ids[0]
        token_ids = np.where(token_ids < 0, self.tokenizer.pad_token_id, token_ids)
        return [text.strip() for text in self.tokenizer.batch_decode(token_ids, skip_special_tokens=True)]

    def __call__(self, eval_prediction) -> dict[str, float]:
        hypotheses = self.decode(eval_prediction.predictions)
        if len(hypotheses) > len(self.references):
            # A distributed evaluation pads its last round with repeated examples, which always come after every
            # real one in the gathered order; accelerate does not always drop them (seen with accelerate 1.15, gloo).
            hypotheses = hypotheses[: len(self.references)]
        if len(hypotheses) != len(self.references):
            raise ValueError(f"{len(hypotheses)} predictions for {len(self.references)} references: call "
                             "TaskMetrics.use() with the split being scored")
        self.check_order(eval_prediction.label_ids)
        self.last_hypotheses = hypotheses
        return {**self.scores(self.references, hypotheses, self.groups), unusable_key(): unusable_share(hypotheses)}

    def scores(self, references: list[str], hypotheses: list[str], groups: list[str]) -> dict[str, float]:
        """`{metric: mean over groups, metric_<group>: ..., metric_pooled: ...}` (plus `*_ci_low` / `*_ci_high`
        with bootstrap resamples), rounded to 2 decimals."""
        stats = self.statistics(references, hypotheses)
        rows_by_group: dict[str, list[int]] = {}
        for index, group in enumerate(groups):
            rows_by_group.setdefault(group, []).append(index)
        by_group = {group: stats[rows] for group, rows in sorted(rows_by_group.items())}
        results = {score_key(self.metric, group): self._point(group_stats) for group, group_stats in by_group.items()}
        results[score_key(self.metric)] = float(np.mean(list(results.values()))) if results else 0.0
        results[score_key(self.metric, POOLED)] = self._point(stats) if references else 0.0
        if self.bootstrap_resamples and references:
            results.update(self.intervals(stats, by_group))
        return {key: round(value, 2) for key, value in results.items()}

    def _point(self, stats: np.ndarray) -> float:
        return float(score_statistics(self.metric, stats.sum(axis=0)))

    def intervals(self, stats: np.ndarray, by_group: dict[str, np.ndarray]) -> dict[str, float]:
        """Bootstrap intervals of every group's score, of their mean and of the pooled score (one seeded generator,
        so the same predictions always give the same intervals)."""
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        resampled = {group: score_statistics(self.metric, bootstrap_sums(group_stats, self.bootstrap_resamples, rng))
                     for group, group_stats in by_group.items()}
        resampled[None] = np.mean(np.stack(list(resampled.values())), axis=0)
        resampled[POOLED] = score_statistics(self.metric, bootstrap_sums(stats, self.bootstrap_resamples, rng))
        out = {}
        for group, samples in resampled.items():
            low, high = interval_keys(score_key(self.metric, group))
            out[low], out[high] = percentile_interval(samples)
        return out


def is_degenerate(hypothesis: str) -> bool:
    """Whether a hypothesis holds a run of 6 or more identical characters (a looping decoder)."""
    return DEGENERATE_RUN.search(hypothesis) is not None


def is_unusable(hypothesis: str) -> bool:
    """Whether a hypothesis is no output at all: empty, a run of identical characters ([`is_degenerate`]) or the
    same word 4+ times in a row. A run whose hypotheses are mostly unusable ([`UNLEARNED_SHARE`]) has not learned its
    task, whatever its scores."""
    return not hypothesis.strip() or is_degenerate(hypothesis) or LOOPING_WORDS.search(hypothesis) is not None


def is_unlearned(unusable: float | None) -> bool:
    """Whether a run with this share of unusable hypotheses ([`unusable_share`]; `None`: not recorded) has not learned
    its task: from [`UNLEARNED_SHARE`] on."""
    return unusable is not None and unusable >= UNLEARNED_SHARE


def is_noise_dependent(eval_mode: float | None, train_mode: float | None) -> bool:
    """Whether a trained model whose cross-entropy on training examples is `eval_mode` in evaluation mode and
    `train_mode` in training mode (`HeadSelSeq2SeqTrainer.mode_losses`; `None`: not recorded) works only with its
    training-time noise (dropout, sampling noise): worse without it by more than [`NOISE_DEPENDENCE_NATS`]."""
    return eval_mode is not None and train_mode is not None and eval_mode - train_mode > NOISE_DEPENDENCE_NATS


def unusable_share(hypotheses: list[str]) -> float:
    """The share of [`is_unusable`] hypotheses (0 for none), rounded to 4 decimals."""
    return round(sum(map(is_unusable, hypotheses)) / len(hypotheses), 4) if hypotheses else 0.0


def rows_by_group(rows: list[dict]) -> dict[str, list[dict]]:
    """`generated_predictions.jsonl` rows (`group`, `reference`, `prediction`) per group, groups sorted."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    return dict(sorted(groups.items()))


def corpus_chrf(rows: list[dict]) -> float:
    """sacrebleu's default corpus chrF of prediction rows against their references."""
    hypotheses, references = canonical([r["prediction"] for r in rows]), canonical([r["reference"] for r in rows])
    return CHRF().corpus_score(hypotheses, [references]).score


def prediction_quality(rows: list[dict]) -> dict[str, float]:
    """chrF of `generated_predictions.jsonl` rows (`group`, `reference`, `prediction`): `chrf_pooled` over every
    row, `chrf_<group>` per group and `chrf` their mean (sacrebleu's default chrF), plus `degenerate`, the fraction of
    hypotheses with a run of 6+ identical characters, and `degenerate_references`, that of the references (format
    strings, long numbers: what a system reproducing every reference would score). Rounded to 2 decimals (the
    fractions to 4)."""
    if not rows:
        raise ValueError("no predictions to score")
    scores = {score_key("chrf", group): corpus_chrf(selected) for group, selected in rows_by_group(rows).items()}
    scores[score_key("chrf")] = float(np.mean(list(scores.values())))
    scores[score_key("chrf", POOLED)] = corpus_chrf(rows)
    for key, column in (("degenerate", "prediction"), ("degenerate_references", "reference")):
        scores[key] = sum(is_degenerate(row[column]) for row in rows) / len(rows)
    return {key: round(value, 4 if key.startswith("degenerate") else 2) for key, value in scores.items()}
