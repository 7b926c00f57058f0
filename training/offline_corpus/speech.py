# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Offline speech for the corpus: espeak-ng voices as speakers, sox effects and added noise as per-domain acoustic
conditions, written as 16 kHz mono 16-bit wav.

One utterance is made in three steps: `espeak-ng` reads the text with a speaker's voice variant, pitch and speed;
`sox` resamples to 16 kHz mono and applies the domain's effects (band limits, tempo, reverberation), in repeatable
mode (`-R`); then white noise at the domain's signal-to-noise ratio is added with a generator seeded by the
segment id, so the same build writes the same samples.

Each wav has a sidecar `{id}.wav.json` recording what made it (a hash of the text, voice, speaker, condition, noise
seed, synthesis settings and tool versions: [`synthesis_key`]) and its frame count and size. A rebuild reuses a wav
only when that record matches and the file reads whole; any other wav (changed text or voice, truncated, damaged,
or written before these records existed) is synthesised again. The segment id alone cannot vouch for the audio: it
is a hash of the English source, and the audio speaks the target.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile
from tqdm.auto import tqdm

SAMPLING_RATE = 16000
SYNTHESIS_VERSION = 1
"""Part of every [`synthesis_key`]: bump it when the synthesis steps change, so that rebuilds re-synthesise."""
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


@functools.cache
def tool_versions() -> dict[str, str]:
    """The versions of `espeak-ng` and `sox` (`"missing"` / `"unknown"` when not found), part of the synthesis key
    because another version may make other samples."""
    versions = {}
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            versions[tool] = "missing"
            continue
        output = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"\d+(?:\.\d+)+", output)  # not the whole line: espeak-ng adds its data path
        versions[tool] = match.group() if match else "unknown"
    return versions


def synthesis_key(utterance: Utterance) -> str:
    """A hash of everything that decides an utterance's samples (not its path, nor the names of its speaker and
    condition): a wav is reused only when its recorded key is this one."""
    recipe = {
        "version": SYNTHESIS_VERSION, "sampling_rate": SAMPLING_RATE, "tools": tool_versions(),
        "id": utterance.id,  # seeds the noise
        "voice": ESPEAK_VOICES[utterance.lang], "text": utterance.text,
        "speaker": [utterance.speaker.variant, utterance.speaker.pitch, utterance.speaker.speed],
        "condition": [list(utterance.condition.sox_effects), utterance.condition.snr_db],
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def record_path(path: Path) -> Path:
    """The sidecar of a wav, recording what made it (`{id}.wav.json`)."""
    return path.with_name(path.name + ".json")


def reusable_frames(path: Path, key: str) -> int | None:
    """The frame count of the wav at `path` when its record names `key` and the file reads whole (same frame count
    and size as recorded, 16 kHz mono), else `None`: a missing, stale, truncated or damaged file is made again."""
    try:
        record = json.loads(record_path(path).read_text(encoding="utf-8"))
        info = soundfile.info(str(path))
        size = path.stat().st_size
    except (OSError, ValueError, RuntimeError):  # RuntimeError: soundfile's LibsndfileError on a damaged file
        return None
    if not isinstance(record, dict) or record.get("key") != key:
        return None
    if (info.samplerate, info.channels) != (SAMPLING_RATE, 1) or not 0 < info.frames == record.get("frames"):
        return None
    return info.frames if size == record.get("bytes") else None


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(temporary path)`, then rename the temporary file to `path`: a reader (or a later build) never
    sees a half-written file."""
    part = path.with_name(path.name + ".part")
    try:
        write(part)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def write_audio(path: Path, audio: np.ndarray, key: str) -> None:
    """Write `audio` as a 16-bit wav at `path` and its record (key, frames, bytes) beside it."""
    # the old record must not vouch for the new file if the build stops between the two renames
    record_path(path).unlink(missing_ok=True)
    _replace(path, lambda part: soundfile.write(str(part), audio, SAMPLING_RATE, subtype="PCM_16", format="WAV"))
    record = {"key": key, "frames": len(audio), "bytes": path.stat().st_size}
    _replace(record_path(path), lambda part: part.write_text(json.dumps(record) + "\n", encoding="utf-8"))


def synthesize(utterance: Utterance, reuse: bool = True) -> SynthesisResult:
    """Synthesise one utterance (see the module docstring), or reuse its wav when its record matches; failures
    (including a file that cannot be written) are returned, not raised, to be counted."""
    key = synthesis_key(utterance)
    frames = reusable_frames(utterance.path, key) if reuse else None
    if frames is not None:
        return SynthesisResult(utterance, frames, reused=True)
    voice = f"{ESPEAK_VOICES[utterance.lang]}+{utterance.speaker.variant}"
    try:
        utterance.path.parent.mkdir(parents=True, exist_ok=True)
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
            write_audio(utterance.path, audio, key)
    except (RuntimeError, OSError) as error:  # RuntimeError includes soundfile's LibsndfileError
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
    tool_versions()  # once, before the threads each ask for it
    # threads are enough: each job's work is done by its espeak-ng and sox child processes
    with ThreadPoolExecutor(max_workers=workers) as pool:
        jobs = pool.map(lambda utterance: synthesize(utterance, reuse), utterances)
        return list(tqdm(jobs, total=len(utterances), desc="Synthesising speech", unit="utt", disable=not progress))
