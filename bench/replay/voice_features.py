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

    Normalised autocorrelation r(lag) / sqrt(E(head) E(tail)) for every lag at once; takes the shortest
    lag that is a local peak within 90% of the best one (avoids octave errors), refined by parabolic
    interpolation."""
    n = window.size
    lo = int(VOICE_RATE_HZ / PITCH_MAX_HZ)
    hi = min(n - 120, int(VOICE_RATE_HZ / PITCH_MIN_HZ))  # keep >= 120 overlapping samples
    if hi < lo:
        return 0.0
    r = np.correlate(window, window, "full")[n - 1 :]  # r[lag] = sum x[i] x[i + lag]
    energy = np.concatenate(([0.0], np.cumsum(window * window)))
    lags = np.arange(lo, hi + 1)
    denom = np.sqrt(energy[n - lags] * (energy[n] - energy[lags]))
    corrs = np.divide(r[lags], denom, out=np.zeros(lags.size), where=denom > 0)
    best = float(corrs.max())
    if best < VOICED_CORRELATION:
        return 0.0
    inner = np.arange(1, corrs.size - 1)
    peaks = inner[
        (corrs[inner - 1] <= corrs[inner]) & (corrs[inner] >= corrs[inner + 1]) & (corrs[inner] >= 0.9 * best)
    ]
    i = int(peaks[0]) if peaks.size else int(corrs.argmax())
    shift = 0.0
    if 0 < i < corrs.size - 1:
        curve = corrs[i - 1] - 2 * corrs[i] + corrs[i + 1]
        shift = float(0.5 * (corrs[i - 1] - corrs[i + 1]) / curve) if curve else 0.0
    return VOICE_RATE_HZ / (lo + i + shift)
