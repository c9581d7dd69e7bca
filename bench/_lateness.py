"""The length sweep's arithmetic, apart from any device: sizes, the tail's mix, and lateness
from the kernels' own stamps (``spin_stamped`` writes its start and end, global timer ns).

Lateness of one wait is its latency (submit start to resumed coroutine, ``perf_counter``) less
the kernel's own GPU length (end − start read back from its stamp slots): what the wait adds
beyond the work, launch included.  The ``empty`` kernel (length 0) has no stamps: its GPU
length counts as 0.  A stamped kernel whose slots stayed zero (or ran backwards) gives no
length: its sample is left out of the lateness and counted in ``stamps_missing``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "LENGTHS_US", "SAMPLES", "WARM", "NEVER_SEEN_US", "NEVER_SEEN_K", "TAIL_MIX", "TAIL_N", "TAIL_SEED", "LATE_US",
    "samples", "warm", "gpu_lengths_us", "late_summary", "tail_summary", "length_row", "tail_lengths", "mix_mean_us",
    "counter_delta", "fit_count", "seconds_of",
]

#: Kernel lengths of the sweep, µs (0: the ``empty`` kernel).
LENGTHS_US = (0, 50, 200, 1_000, 5_000, 10_000, 20_000, 50_000)
#: Measured waits per length: (full, quick).  Sized so that six device × loop rows, the
#: baselines, the never-seen series and the tail runs fit in about 110 s on an H200.
SAMPLES: dict[int, tuple[int, int]] = {
    0: (400, 20), 50: (300, 12), 200: (200, 10), 1_000: (80, 6),
    5_000: (40, 4), 10_000: (40, 3), 20_000: (40, 2), 50_000: (20, 2),
}
#: Discarded waits before each length's block (full, quick): the engine predicts by kernel
#: and grid, not by arguments, so every length of ``spin_stamped`` shares one prediction,
#: which must settle on the new length before its block is measured.  It keeps the few lengths
#: such work takes (its modes), and one the work stopped taking fades within about 28 waits;
#: until then each wait first looks at the old length (a spin and a wake-up of the loop), which
#: is the cost of a change of length, not of the length measured.
WARM: dict[int, tuple[int, int]] = {
    0: (50, 5), 50: (40, 4), 200: (32, 3), 1_000: (32, 2),
    5_000: (32, 1), 10_000: (32, 1), 20_000: (32, 1), 50_000: (32, 1),
}
#: Work never seen before: lengths and first waits per length (full, quick).
NEVER_SEEN_US = (1_000, 10_000)
NEVER_SEEN_K = (20, 3)
#: The tail run's mix: length µs -> weight (mean about 1 ms), its size (full, quick) and seed.
TAIL_MIX: dict[int, float] = {0: 0.30, 50: 0.20, 200: 0.20, 1_000: 0.13, 5_000: 0.17}
TAIL_N = (10_000, 200)
TAIL_SEED = 20261201
#: A wait later than this (µs of lateness) is counted in the tail's ``late_over_1ms``.
LATE_US = 1_000.0


def samples(us: int, quick: bool) -> int:
    return SAMPLES[us][1 if quick else 0]


def warm(us: int, quick: bool) -> int:
    return WARM[us][1 if quick else 0]


def seconds_of(lengths_us: Sequence[int], per_wait_us: float = 60.0) -> float:
    """About how long waits of these lengths take one after another (each plus ``per_wait_us``)."""
    return float(sum(lengths_us)) / 1e6 + len(lengths_us) * per_wait_us / 1e6


def gpu_lengths_us(stamps: np.ndarray[Any, Any] | None, lengths_us: Sequence[int]) -> np.ndarray[Any, Any]:
    """Each sample's GPU length in µs from its slot pair (``stamps[2i]`` start, ``stamps[2i+1]``
    end, ns): 0 for an ``empty`` kernel (length 0), NaN where a stamped kernel left none."""
    n = len(lengths_us)
    out = np.zeros(n, dtype=np.float64)
    want = np.asarray(lengths_us, dtype=np.int64) > 0
    if not want.any():
        return out
    if stamps is None:
        out[want] = np.nan
        return out
    s = np.asarray(stamps, dtype=np.uint64)[: 2 * n].reshape(n, 2)
    start, end = s[:, 0], s[:, 1]
    ok = want & (start > 0) & (end >= start)
    out[want & ~ok] = np.nan
    out[ok] = (end[ok] - start[ok]).astype(np.float64) / 1e3
    return out


def late_summary(lateness_us: Sequence[float] | np.ndarray[Any, Any]) -> dict[str, Any]:
    """n, p50, p90, p99, max, min, mean of the finite lateness values (µs); ``{"n": 0}`` if none.
    ``median`` repeats p50: ``bench.compare`` compares every summary by its median."""
    a = np.asarray(lateness_us, dtype=np.float64)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"n": 0}
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"n": int(a.size), "p50": float(p50), "median": float(p50), "p90": float(p90), "p99": float(p99),
            "max": float(a.max()), "min": float(a.min()), "mean": float(a.mean())}


def tail_summary(lateness_us: np.ndarray[Any, Any], lengths_us: Sequence[int], worst: int = 10) -> dict[str, Any]:
    """The tail's figures: ``late_summary`` with p99.9, how many waits were later than
    ``LATE_US``, and the ``worst`` waits (lateness, length, sample index) that explain the max."""
    a = np.asarray(lateness_us, dtype=np.float64)
    out = late_summary(a)
    finite = np.isfinite(a)
    if out["n"]:
        out["p999"] = float(np.percentile(a[finite], 99.9))
    out["late_over_1ms"] = int(np.count_nonzero(a[finite] > LATE_US))
    order = np.argsort(np.where(finite, a, -np.inf))[::-1][:worst]
    out["worst"] = [{"lateness_us": float(a[i]), "length_us": int(lengths_us[i]), "index": int(i)} for i in order if finite[i]]
    by: dict[str, Any] = {}
    lens = np.asarray(lengths_us, dtype=np.int64)
    for us in sorted(set(int(x) for x in lengths_us)):
        by[str(us)] = late_summary(a[lens == us])
    out["by_length_us"] = by
    return out


def length_row(lat_s: Sequence[float], stamps: np.ndarray[Any, Any] | None, lengths_us: Sequence[int], cpu_s: float,
               counters: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One block's figures: lateness (latency − the kernel's GPU length) p50/p90/p99/max µs, the
    latency itself, the median GPU length, process CPU per wait (µs) and the engine's counters."""
    lat_us = np.asarray(lat_s, dtype=np.float64) * 1e6
    gpu = gpu_lengths_us(stamps, lengths_us)
    late = lat_us - gpu
    fin = gpu[np.isfinite(gpu)]
    row: dict[str, Any] = {
        "n": len(lat_us),
        "lateness_us": late_summary(late),
        "latency_us": late_summary(lat_us),
        "kernel_gpu_us": float(np.median(fin)) if fin.size else None,
        "kernel_gpu_us_max": float(fin.max()) if fin.size else None,
        "stamps_missing": int(np.count_nonzero(~np.isfinite(gpu))),
        "cpu_us_per_wait": cpu_s * 1e6 / len(lat_us) if len(lat_us) else None,
    }
    if counters is not None:
        row["counters"] = dict(counters)
    return row


def tail_lengths(n: int, seed: int = TAIL_SEED, mix: Mapping[int, float] = TAIL_MIX) -> list[int]:
    """``n`` lengths (µs) drawn from ``mix`` with a fixed seed: the same sequence every run."""
    lengths = sorted(mix)
    w = np.asarray([mix[us] for us in lengths], dtype=np.float64)
    rng = np.random.default_rng(seed)
    return [int(lengths[i]) for i in rng.choice(len(lengths), size=n, p=w / w.sum())]


def mix_mean_us(mix: Mapping[int, float] = TAIL_MIX) -> float:
    total = sum(mix.values())
    return sum(us * w for us, w in mix.items()) / total


def counter_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What each engine counter grew by over a block (counters only ever grow)."""
    return {k: int(v) - int(before.get(k, 0)) for k, v in after.items()}


def fit_count(n: int, per_wait_s: float, left_s: float, floor: int = 100) -> tuple[int, str | None]:
    """How many of ``n`` waits of ``per_wait_s`` fit in ``left_s``: ``(n, None)`` when all do,
    else the count that fits and a note saying why it is smaller (0 below ``floor``)."""
    if per_wait_s <= 0 or math.isinf(left_s) or n * per_wait_s <= left_s:
        return n, None
    fits = int(max(0.0, left_s) / per_wait_s)
    if fits < floor:
        return 0, f"skipped: {max(0.0, left_s):.0f} s of the --max-seconds budget left, fewer than {floor} waits fit"
    return fits, f"reduced from {n:,} to {fits:,} waits: {left_s:.0f} s of the --max-seconds budget left for it"
