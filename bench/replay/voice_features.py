"""Per-10 ms voice features (`voicef`): what a link too slow for 16 kHz PCM carries instead."""

from __future__ import annotations

import numpy as np

from bench.replay.channels import VOICE_RATE_HZ

PITCH_MIN_HZ = 80.0
PITCH_MAX_HZ = 400.0
VOICED_MAX_ZCR = 0.3  # noise-like chunks cross zero far more often than voiced speech
VOICED_RMS = 0.005  # about -46 dBFS: quieter chunks are silence
VOICED_CORRELATION = 0.4  # normalised autocorrelation peak for a periodic (voiced) chunk


def voice_features(pcm: bytes, previous: bytes = b"") -> list[float]:
    """[rms, zcr, pitch_hz, voiced] of one int16 little-endian 10 ms chunk.

    rms: root mean square over full scale (0..1) and zcr: fraction of adjacent samples that change sign,
    both of the chunk; pitch_hz: autocorrelation pitch in 80-400 Hz over a 20 ms window (`previous`
    chunk + this one; 0 when unvoiced); voiced: 1.0 or 0.0.
    """
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0
    rms = float(np.sqrt(np.mean(x * x))) if x.size else 0.0
    signs = np.signbit(x)
    zcr = float(np.count_nonzero(signs[1:] != signs[:-1]) / max(1, x.size - 1))
    pitch = 0.0
    if rms >= VOICED_RMS and zcr <= VOICED_MAX_ZCR:
        window = np.frombuffer(previous + pcm, dtype="<i2").astype(np.float64)
        pitch = _pitch(window - window.mean())
    return [round(rms, 5), round(zcr, 4), round(pitch, 1), 1.0 if pitch else 0.0]


def _pitch(window: np.ndarray) -> float:
    """Autocorrelation pitch of a centred window, 0.0 when no lag correlates well enough.

    Takes the shortest lag that is a local correlation peak within 90% of the best one (avoids octave
    errors), refined by parabolic interpolation."""
    lo = int(VOICE_RATE_HZ / PITCH_MAX_HZ)
    hi = min(window.size - 120, int(VOICE_RATE_HZ / PITCH_MIN_HZ))  # keep >= 120 overlapping samples
    corrs = []
    for lag in range(lo, hi + 1):
        a, b = window[:-lag], window[lag:]
        denom = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
        corrs.append(float(np.dot(a, b)) / denom if denom else 0.0)
    if not corrs or max(corrs) < VOICED_CORRELATION:
        return 0.0
    best = max(corrs)
    peaks = [i for i in range(1, len(corrs) - 1) if corrs[i - 1] <= corrs[i] >= corrs[i + 1]]
    i = next((p for p in peaks if corrs[p] >= 0.9 * best), corrs.index(best))
    shift = 0.0
    if 0 < i < len(corrs) - 1:
        curve = corrs[i - 1] - 2 * corrs[i] + corrs[i + 1]
        shift = 0.5 * (corrs[i - 1] - corrs[i + 1]) / curve if curve else 0.0
    return VOICE_RATE_HZ / (lo + i + shift)
