# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Offline speech for the corpus: espeak-ng voices as speakers, sox effects and added noise as per-domain acoustic
conditions, written as 16 kHz mono 16-bit wav.

One utterance is made in three steps: `espeak-ng` reads the text with a speaker's voice variant, pitch and speed;
`sox` resamples to 16 kHz mono and applies the domain's effects (band limits, tempo, reverberation), in repeatable
mode (`-R`); then white noise at the domain's signal-to-noise ratio is added with a generator seeded by the
segment id, so the same build writes the same samples.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile
from tqdm.auto import tqdm

SAMPLING_RATE = 16000
MAX_WORKERS = 2
"""At most this many synthesis jobs (each an espeak-ng then a sox process) run at once."""

ESPEAK_VOICES = {"ar": "ar", "de": "de", "el": "el", "es": "es", "fr": "fr-fr", "it": "it", "pt": "pt-br",
                 "ru": "ru", "en": "en-us"}
"""Corpus language -> espeak-ng voice (Brazilian Portuguese, like the text)."""


@dataclass(frozen=True)
class Speaker:
    """A voice: an espeak-ng variant (`m1`, `f2`, ...) with its pitch (0-99) and speed (words per minute)."""

    name: str
    variant: str
    pitch: int
    speed: int


SPEAKERS = (
    Speaker("m1", "m1", 40, 150),
    Speaker("f2", "f2", 60, 160),
    Speaker("m3", "m3", 30, 170),
    Speaker("f4", "f4", 70, 140),
)


@dataclass(frozen=True)
class Condition:
    """An acoustic condition: sox effects after resampling, and white noise at `snr_db` (`None`: no noise)."""

    name: str
    description: str
    sox_effects: tuple[str, ...] = ()
    snr_db: float | None = None


CONDITIONS = (
    Condition("clean", "clean wideband speech"),
    Condition("telephone", "telephone band (300-3400 Hz) with white noise at 20 dB SNR",
              ("sinc", "300-3400"), 20.0),
    Condition("fast_reverb", "speech 25% faster with room reverberation", ("tempo", "1.25", "reverb", "50")),
    Condition("far_field", "muffled far-field speech (low-pass 4 kHz, strong reverberation) with noise at 15 dB SNR",
              ("lowpass", "4000", "reverb", "80"), 15.0),
    Condition("slow_noisy", "speech 15% slower with white noise at 10 dB SNR", ("tempo", "0.85"), 10.0),
)
DOMAIN_CONDITIONS = {"django": "clean", "wagtail": "telephone", "sphinx": "fast_reverb", "horizon": "far_field",
                     "oscar": "slow_noisy"}
"""The condition of each default domain; other domains take the conditions in turn (see [`condition_for`])."""


def condition_for(domain: str, domains: list[str]) -> Condition:
    """The acoustic condition of `domain`: its entry in `DOMAIN_CONDITIONS`, else the conditions in turn over the
    sorted domain list."""
    by_name = {condition.name: condition for condition in CONDITIONS}
    if domain in DOMAIN_CONDITIONS:
        return by_name[DOMAIN_CONDITIONS[domain]]
    return CONDITIONS[sorted(domains).index(domain) % len(CONDITIONS)]


def speaker_for(segment_id: str) -> Speaker:
    """The speaker of a segment, from a hash of its id (so each split has every speaker)."""
    return SPEAKERS[int(hashlib.sha1(segment_id.encode("utf-8")).hexdigest(), 16) % len(SPEAKERS)]


def missing_tools() -> list[str]:
    """The synthesis programs (`espeak-ng`, `sox`) that are not on the PATH."""
    return [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]


@dataclass(frozen=True)
class Utterance:
    """One utterance to synthesise: text in `lang`, spoken by `speaker` under `condition`, written to `path`."""

    id: str
    lang: str
    text: str
    speaker: Speaker
    condition: Condition
    path: Path


@dataclass
class SynthesisResult:
    """The outcome of one utterance: its number of samples, or the error that made it fail."""

    utterance: Utterance
    n_samples: int = 0
    error: str | None = None
    reused: bool = field(default=False)


def _run(command: list[str], text: str | None = None) -> None:
    result = subprocess.run(command, input=text, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({result.returncode}): {result.stderr.strip()[:300]}")


def add_noise(audio: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """`audio` plus white noise at `snr_db` dB signal-to-noise ratio (signal power measured over the utterance)."""
    power = float(np.mean(audio.astype(np.float64) ** 2))
    if power == 0.0:
        return audio
    noise = np.random.default_rng(seed).standard_normal(len(audio)) * np.sqrt(power / 10 ** (snr_db / 10))
    return np.clip(audio + noise, -1.0, 1.0).astype(np.float32)


def synthesize(utterance: Utterance, reuse: bool = True) -> SynthesisResult:
    """Synthesise one utterance (see the module docstring); failures are returned, not raised, to be counted."""
    if reuse and utterance.path.is_file() and utterance.path.stat().st_size > 44:
        return SynthesisResult(utterance, soundfile.info(str(utterance.path)).frames, reused=True)
    utterance.path.parent.mkdir(parents=True, exist_ok=True)
    voice = f"{ESPEAK_VOICES[utterance.lang]}+{utterance.speaker.variant}"
    try:
        with tempfile.TemporaryDirectory(prefix="espeak-") as work:
            raw, processed = Path(work) / "raw.wav", Path(work) / "processed.wav"
            _run(["espeak-ng", "-v", voice, "-p", str(utterance.speaker.pitch), "-s", str(utterance.speaker.speed),
                  "-w", str(raw), "--stdin"], utterance.text)
            _run(["sox", "-R", "-q", str(raw), "-r", str(SAMPLING_RATE), "-c", "1", "-b", "16", str(processed),
                  *utterance.condition.sox_effects, "norm", "-3"])
            audio, rate = soundfile.read(str(processed), dtype="float32")
            if rate != SAMPLING_RATE or audio.ndim != 1 or len(audio) == 0:
                raise RuntimeError(f"sox wrote {len(audio)} samples at {rate} Hz, expected mono {SAMPLING_RATE} Hz")
            if utterance.condition.snr_db is not None:
                seed = int(hashlib.sha1(utterance.id.encode("utf-8")).hexdigest()[:8], 16)
                audio = add_noise(audio, utterance.condition.snr_db, seed)
            soundfile.write(str(utterance.path), audio, SAMPLING_RATE, subtype="PCM_16")
    except (RuntimeError, OSError, soundfile.LibsndfileError) as error:
        return SynthesisResult(utterance, error=str(error))
    return SynthesisResult(utterance, len(audio))


def synthesize_all(utterances: list[Utterance], workers: int = MAX_WORKERS, reuse: bool = True,
                   progress: bool = True) -> list[SynthesisResult]:
    """Synthesise utterances with at most `workers` (1 or 2) at once; results in the order of `utterances`."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be between 1 and {MAX_WORKERS} (the machine has 2 cores), got {workers}")
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"speech synthesis needs {' and '.join(missing)}: apt-get install -y espeak-ng sox")
    # threads are enough: each job's work is done by its espeak-ng and sox child processes
    with ThreadPoolExecutor(max_workers=workers) as pool:
        jobs = pool.map(lambda utterance: synthesize(utterance, reuse), utterances)
        return list(tqdm(jobs, total=len(utterances), desc="Synthesising speech", unit="utt", disable=not progress))
