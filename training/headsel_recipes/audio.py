# Copyright 2026 The hf-headsel authors. Licensed under the Apache License, Version 2.0.
"""Audio for the speech recipes: reading (soundfile, no torchcodec), resampling to 16 kHz, log-mel features with
`Speech2TextFeatureExtractor`, and SpecAugment.

Audio cells may be a path, a fairseq-style `path:offset:length` (frames of an audio file, or bytes of an uncompressed
zip holding `.npy` features or audio), a `.npy` file of precomputed features, or a `datasets.Audio(decode=False)`
dict (`bytes` or `path`; an already-decoded `array` + `sampling_rate` works too).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import soundfile
import torch
import torch.nn.functional as F

NPY_MAGIC = b"\x93NUMPY"
# The stock `Speech2TextFeatureExtractor`'s analysis window (400 samples at 16 kHz): shorter audio has no frame.
WINDOW_SECONDS = 0.025


class AudioError(Exception):
    """An audio cell that cannot be read (the example is skipped and counted)."""


@dataclass
class AudioInput:
    """A decoded audio cell: a mono waveform with its rate, or precomputed features `[frames, dims]`."""

    waveform: np.ndarray | None = None
    sampling_rate: int | None = None
    features: np.ndarray | None = None

    @property
    def duration(self) -> float:
        """Seconds of audio (features count 100 frames a second, the fbank frame rate)."""
        if self.features is not None:
            return self.features.shape[0] / 100.0
        return self.waveform.shape[0] / self.sampling_rate


def _decode_bytes(data: bytes) -> AudioInput:
    if data.startswith(NPY_MAGIC):
        return AudioInput(features=np.load(io.BytesIO(data)))
    waveform, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return AudioInput(waveform=waveform.mean(axis=1), sampling_rate=rate)


def split_fairseq_path(path: str) -> tuple[str, int | None, int | None]:
    """`file:offset:length` -> `(file, offset, length)`; a plain path -> `(path, None, None)`."""
    parts = path.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], int(parts[1]), int(parts[2])
    return path, None, None


def _check_complete(path: str, offset: int, length: int, got: int, unit: str) -> None:
    # a segment running past the end of its file would come back cut short, no longer matching its transcript
    if got < length:
        raise AudioError(f"{path}:{offset}:{length} runs past the end of the file ({got} of {length} {unit} there)")


def read_audio_path(path: str) -> AudioInput:
    """Read a path cell (see the module docstring). A segment (`:offset:length`) must lie inside its file, and a
    `.npy` file is read whole (an offset on one is refused)."""
    path, offset, length = split_fairseq_path(path)
    suffix = path.lower().rsplit(".", 1)[-1]
    if offset is not None and suffix == "zip":
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        _check_complete(path, offset, length, len(data), "bytes")
        return _decode_bytes(data)
    if suffix == "npy":
        if offset is not None:
            raise AudioError(f"{path}:{offset}:{length}: a .npy file holds one utterance's features; give its path "
                             "alone (offsets address bytes of a .zip or frames of an audio file)")
        return AudioInput(features=np.load(path))
    if offset is not None:
        waveform, rate = soundfile.read(path, start=offset, frames=length, dtype="float32", always_2d=True)
        _check_complete(path, offset, length, waveform.shape[0], "frames")
    else:
        waveform, rate = soundfile.read(path, dtype="float32", always_2d=True)
    return AudioInput(waveform=waveform.mean(axis=1), sampling_rate=rate)


def _mono(waveform: np.ndarray) -> np.ndarray:
    """A mono waveform from a decoded array: `datasets` gives `[channels, samples]`, soundfile `[samples, channels]`;
    the channels are the shorter axis."""
    if waveform.ndim != 2:
        return waveform
    return waveform.mean(axis=0 if waveform.shape[0] <= waveform.shape[1] else 1)


def read_audio(cell) -> AudioInput:
    """Decode an audio cell; any failure is an [`AudioError`]."""
    try:
        if isinstance(cell, str) and cell:
            return read_audio_path(cell)
        if isinstance(cell, dict):
            if cell.get("array") is not None and cell.get("sampling_rate"):
                return AudioInput(waveform=_mono(np.asarray(cell["array"], dtype=np.float32)),
                                  sampling_rate=int(cell["sampling_rate"]))
            if cell.get("bytes"):
                return _decode_bytes(cell["bytes"])
            if cell.get("path"):
                return read_audio_path(cell["path"])
    except Exception as error:  # soundfile, zip and numpy raise many kinds; all mean "unreadable"
        raise AudioError(f"{type(error).__name__}: {error}") from error
    raise AudioError(f"no audio in cell {cell!r:.80}")


# --------------------------------------------------------------------------------------------------------------------
# Resampling
# --------------------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _torchaudio_resample():
    """`torchaudio.functional.resample` when torchaudio imports cleanly, else `None`."""
    try:
        from torchaudio.functional import resample

        return resample
    except Exception:  # not installed, or a CUDA wheel beside a CPU torch
        return None


@lru_cache(maxsize=16)
def _sinc_kernel(orig: int, new: int, width: int = 6, rolloff: float = 0.99) -> tuple[torch.Tensor, int]:
    """Hann-windowed sinc interpolation kernels `[new, 1, taps]` for `orig -> new` (already divided by their gcd);
    the algorithm of `torchaudio.functional.resample` (`sinc_interp_hann`)."""
    base = min(orig, new) * rolloff
    half = math.ceil(width * orig / base)
    idx = torch.arange(-half, half + orig, dtype=torch.float64)[None, None] / orig
    t = (torch.arange(0, -new, -1, dtype=torch.float64)[:, None, None] / new + idx) * base
    t = t.clamp(-width, width)
    window = torch.cos(t * math.pi / width / 2) ** 2
    t = t * math.pi
    kernel = torch.where(t == 0, torch.ones_like(t), torch.sin(t) / t) * window * (base / orig)
    return kernel.float(), half


def resample(waveform: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """Band-limited resampling of a mono waveform (torchaudio when available, else the same algorithm in torch)."""
    if orig_rate == new_rate:
        return waveform
    tensor = torch.from_numpy(np.ascontiguousarray(waveform, dtype=np.float32))
    torchaudio_resample = _torchaudio_resample()
    if torchaudio_resample is not None:
        return torchaudio_resample(tensor, orig_rate, new_rate).numpy()
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    kernel, half = _sinc_kernel(orig, new)
    length = tensor.shape[-1]
    padded = F.pad(tensor[None, None], (half, half + orig))
    out = F.conv1d(padded, kernel, stride=orig)  # [1, new, frames]: phase p of output frame i is sample i*new + p
    out = out.transpose(1, 2).reshape(-1)[: math.ceil(new * length / orig)]
    return out.numpy()


# --------------------------------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------------------------------


def extract_features(audio: AudioInput, feature_extractor) -> np.ndarray:
    """Log-mel filterbank features `[frames, feature_size]` (float32), utterance-normalized as the extractor
    configures. Precomputed features only get the normalization (and must have `feature_size` dimensions)."""
    if audio.features is not None:
        features = np.asarray(audio.features, dtype=np.float32)
        if features.ndim != 2 or features.shape[1] != feature_extractor.feature_size:
            raise AudioError(
                f"precomputed features have shape {features.shape}, expected [frames, {feature_extractor.feature_size}]"
            )
        if getattr(feature_extractor, "do_ceptral_normalize", False):
            with np.errstate(divide="ignore", invalid="ignore"):
                features = feature_extractor.utterance_cmvn(
                    features, features.shape[0], feature_extractor.normalize_means, feature_extractor.normalize_vars
                )
        return features
    waveform = resample(audio.waveform, audio.sampling_rate, feature_extractor.sampling_rate)
    if waveform.shape[0] < round(WINDOW_SECONDS * feature_extractor.sampling_rate):  # no whole frame: the stock
        return np.zeros((0, feature_extractor.feature_size), dtype=np.float32)  # extractor raises below 240 samples
    with np.errstate(divide="ignore", invalid="ignore"):  # silence: variance 0, caught by the caller's check
        features = feature_extractor(
            waveform, sampling_rate=feature_extractor.sampling_rate, return_attention_mask=False, return_tensors="np"
        )["input_features"][0]
    return features.astype(np.float32)


# --------------------------------------------------------------------------------------------------------------------
# SpecAugment
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SpecAugment:
    """Frequency and time masking (Park et al., 2019; fairseq's `specaugment` transform without time warping).

    Each example gets `freq_mask_num` bands of up to `freq_mask_width` channels and `time_mask_num` spans of up to
    `min(time_mask_width, time_mask_ratio * length)` frames set to `mask_value` (0: the mean of normalized
    features). Padding frames are never counted in the length. Randomness comes from torch's global generator, which
    the Trainer seeds and restores on resume.
    """

    freq_mask_num: int = 2
    freq_mask_width: int = 27
    time_mask_num: int = 2
    time_mask_width: int = 100
    time_mask_ratio: float = 1.0
    mask_value: float = 0.0

    def __call__(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Mask a padded batch `features` `[batch, frames, channels]` with `lengths` valid frames per example."""
        batch, frames, channels = features.shape
        features = features.clone()
        lengths = lengths.to(torch.float32)
        channel_range = torch.arange(channels)[None, :]
        frame_range = torch.arange(frames)[None, :]
        valid = (frame_range < lengths[:, None])[:, :, None]
        for _ in range(self.freq_mask_num):
            mask = _random_spans(torch.full((batch,), float(channels)), float(self.freq_mask_width), channel_range)
            features.masked_fill_(mask[:, None, :] & valid, self.mask_value)
        max_width = torch.minimum(torch.full((batch,), float(self.time_mask_width)), lengths * self.time_mask_ratio)
        for _ in range(self.time_mask_num):
            mask = _random_spans(lengths, max_width, frame_range)
            features.masked_fill_(mask[:, :, None], self.mask_value)
        return features


def _random_spans(limits: torch.Tensor, max_width, positions: torch.Tensor) -> torch.Tensor:
    """A boolean mask `[batch, positions]` with one span per row: width `U{0..max_width}`, inside `[0, limit)`."""
    max_width = torch.as_tensor(max_width, dtype=torch.float32).expand_as(limits)
    max_width = torch.minimum(max_width, limits)
    max_width = torch.floor(max_width)  # a fractional cap (ratio x length) must not round a width above it
    widths = torch.floor(torch.rand(limits.shape) * (max_width + 1))
    starts = torch.floor(torch.rand(limits.shape) * (limits - widths + 1))
    return (positions >= starts[:, None]) & (positions < (starts + widths)[:, None])
