"""arig under trio beside asyncio, in one run: the same device, the same figures, each library's own run.

Per device (the host device always; CUDA ``arig.cuda.gpu(0)`` and NV ``arig.nvrm.gpu(0)`` where
they open) and per library (``anyio.run(..., backend="asyncio")`` and ``backend="trio"``), each in
a fresh run with a fresh device:

* ``empty``: one task, ``v = await dev.submit(op); await dev.wait(v)`` for the empty work (the
  host device's no-op fill, an ``empty`` kernel on a GPU): latency p50/p99 and CPU per wait;
* ``tasks_64``: 64 tasks doing the same: completions/s and CPU per completion;
* ``late_1ms``/``late_10ms``: the length sweep's lateness (``bench.sweep``: latency less the
  work's own length) at 1 ms and 10 ms: on a GPU the cubin's ``spin_stamped`` (its own GPU
  stamps), on the host device a fill that spins that long on the host queue's worker and stamps
  itself (``perf_counter``).

Each device runs ``ROUNDS`` rounds, the two libraries alternating (asyncio first in odd rounds,
trio first in even ones), because one run per library is at the mercy of the VM: the same figure
read 29.6 µs and 38.4 µs in one call.  A row's figures are each the median round's (the round of
the median empty p50, of the median 64-task rate, of the median 1 ms and 10 ms lateness p50), and
``rounds`` lists each round's.

``ratio``: trio's figure over asyncio's for each device, the median of the rounds' ratios (each
round's runs are next to each other in time).

On the GPUs each round runs trio twice: without its spin before it blocks (``ARIG_TRIO_SPIN=0``,
row ``<kind>/trio``) and with it (the default: where trio is about to wait for I/O with no task
runnable, a spin for a completion due near; row ``<kind>/trio+spin``).  ``ratio_spin`` is the
latter's figure over asyncio's: what that spin earns is read off one run.  The host device runs on
the pure engine, which has no such spin.
Threads: everything runs on the main thread, in the runs it makes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np

import arig
import arig._env
import arig.host

from ._common import Config, error_record, host_noop_fill, log
from ._lateness import samples, warm
from ._stats import summarize

__all__ = ["run", "LIBRARIES", "LATE_US"]

LIBRARIES = ("asyncio", "trio")
#: Each run of a round: its row's name, the library, whether trio spins before it blocks (ARIG_TRIO_SPIN).
RUNS = (("asyncio", "asyncio", False), ("trio", "trio", False), ("trio+spin", "trio", True))
#: The lengths of the sweep this benchmark repeats (µs).
LATE_US = (1_000, 10_000)
TASKS = 64
#: Rounds per device (full, quick), each one run per library.
ROUNDS = (3, 1)
#: The native core's counters reported per wait of one task and per completion of the 64 tasks.
COUNTED = ("eventfd_writes", "host_functions", "futex_wakes", "spin_hits", "spin_misses", "prewakes", "queries", "idle_spins", "idle_spin_hits", "park_ready", "park_done", "park_far")


# -- the host device's timed work: a fill that spins on the host queue's worker and stamps itself ------


class _HostTarget:
    """``bench.sweep.measure``'s target over the host device: slots are a list of (start, end)."""

    def __init__(self, dev: arig.Device) -> None:
        self.dev = dev

    async def slots(self, n: int) -> list[float]:
        return [0.0] * (2 * n)

    def launch(self, us: int, slots: list[float], i: int, grid: int = 1) -> Any:
        def spin() -> None:
            t0 = time.perf_counter()
            slots[2 * i] = t0
            while time.perf_counter() - t0 < us * 1e-6:
                pass
            slots[2 * i + 1] = time.perf_counter()

        def fill(queue: Any, arg: Any, v: int) -> None:
            queue.enqueue(spin)

        return fill

    def op(self) -> Callable[[Any], Any]:
        submit, wait = self.dev.submit, self.dev.wait

        async def once(fill: Any) -> None:
            await wait(await submit(fill))

        return once

    async def read(self, slots: list[float], n: int) -> np.ndarray[Any, Any]:
        # As the GPU's stamps: ns, start and end per sample (perf_counter's clock).
        return (np.asarray(slots, dtype=np.float64) * 1e9).astype(np.uint64)

    def free(self, slots: Any) -> None:
        return None

    def counters(self) -> dict[str, int] | None:
        return None


async def _target(kind: str) -> tuple[arig.Device, Any, Any]:
    """An open device of ``kind``, its measure target and its empty work."""
    if kind == "host":
        dev = await arig.open(arig.host.cpu(), stop_timeout=10)
        return dev, _HostTarget(dev), host_noop_fill
    from .sweep import ArigTarget, _image, _opener

    dev = await arig.open(_opener(kind), stop_timeout=10)
    try:
        target = ArigTarget(dev, await dev.load(_image(kind)), kind)
    except BaseException:
        await dev.stop()
        raise
    return dev, target, target.empty


# -- the figures, in whichever library runs them ------------------------------------------------------


async def _empty(dev: arig.Device, work: Any, n: int) -> dict[str, Any]:
    submit, wait = dev.submit, dev.wait
    for _ in range(min(n, 200)):  # warm-up, discarded
        await wait(await submit(work))
    lat = [0.0] * n
    pc = time.perf_counter
    c0 = time.process_time()
    for i in range(n):
        t = pc()
        await wait(await submit(work))
        lat[i] = pc() - t
    cpu = time.process_time() - c0
    # _all: every wait since the counters were read (the warm-up's too), for their ratio
    return {"latency_us": summarize(lat, 1e6), "cpu_us_per_wait": cpu * 1e6 / n, "_all": n + min(n, 200)}


async def _tasks(dev: arig.Device, work: Any, seconds: float) -> dict[str, Any]:
    submit, wait = dev.submit, dev.wait
    done = [0]
    stop_at = [0.0]

    async def task() -> None:
        while time.perf_counter() < stop_at[0]:
            await wait(await submit(work))
            done[0] += 1

    stop_at[0] = time.perf_counter() + min(0.1, seconds)  # warm-up
    async with anyio.create_task_group() as tg:
        for _ in range(TASKS):
            tg.start_soon(task)
    warm = [done[0]]
    done[0] = 0
    t0, c0 = time.perf_counter(), time.process_time()
    stop_at[0] = t0 + seconds
    async with anyio.create_task_group() as tg:
        for _ in range(TASKS):
            tg.start_soon(task)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    # _all: every completion since the counters were read (the warm-up's too), for their ratio
    return {"tasks": TASKS, "completions_per_s": done[0] / wall, "cpu_us_per_completion": cpu * 1e6 / max(done[0], 1), "_all": warm[0] + done[0]}


async def _late(target: Any, us: int, quick: bool) -> dict[str, Any]:
    from .sweep import _figures, measure

    await measure(target, [us] * warm(us, quick))
    n = samples(us, quick)
    return _figures(await measure(target, [us] * n), [us] * n)


async def _counted(target: Any, measure: Awaitable[dict[str, Any]], per: str) -> dict[str, Any]:
    """Await ``measure`` (its ``_all``: every wait since it began, the warm-up's too) and, on the
    native core, add the core's counters over those waits under ``per``, each per wait."""
    c0 = target.counters()
    out = await measure
    n = max(out.pop("_all", 1), 1)
    c1 = target.counters()
    if c0 and c1:
        out[per] = {k: (c1[k] - c0[k]) / n for k in COUNTED if k in c0 and k in c1}
    return out


async def _row(kind: str, cfg: Config) -> dict[str, Any]:
    import sniffio

    dev, target, work = await _target(kind)
    try:
        out: dict[str, Any] = {"device": dev.name, "library": sniffio.current_async_library(), "completion": dev.facts.get("completion")}
        # how the waits were seen (the native core's counters): per wait of one task, per completion of 64
        out["empty"] = await _counted(target, _empty(dev, work, cfg.pick(3000, 200)), "per_wait")
        out["tasks_64"] = await _counted(target, _tasks(dev, work, cfg.pick(1.0, 0.2)), "per_completion")
        for us in LATE_US:
            out[f"late_{us // 1000}ms"] = await _late(target, us, cfg.quick)
        return out
    finally:
        await dev.stop()


# -- running it ----------------------------------------------------------------------------------------


def _kinds() -> list[str]:
    kinds = ["host"]
    try:
        import arig.cuda

        if arig.cuda.count() > 0:
            kinds.append("cuda")
    except Exception:  # noqa: BLE001 - no libcuda: no CUDA rows
        pass
    try:
        import arig.nvrm

        if arig.nvrm.count() > 0:
            kinds.append("nv")
    except Exception:  # noqa: BLE001 - no NVIDIA kernel driver: no NV rows
        pass
    return kinds


def _brief(r: dict[str, Any]) -> str:
    if "empty" not in r:
        return str(r.get("error") or r.get("skipped"))[:100]
    late = ", ".join(f"{us // 1000} ms late p50 {r[f'late_{us // 1000}ms']['lateness_us'].get('p50', float('nan')):.0f} µs" for us in LATE_US)
    return (f"empty p50 {r['empty']['latency_us']['median']:.1f} µs (CPU {r['empty']['cpu_us_per_wait']:.1f} µs/wait), "
            f"64 tasks {r['tasks_64']['completions_per_s']:.0f}/s, {late}")


#: Each figure of a row: (its part of the row, its value in that part); the ratio's name.
_FIGURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "empty_p50": ("empty", ("latency_us", "median")),
    "tasks_64": ("tasks_64", ("completions_per_s",)),
    "late_1ms": ("late_1ms", ("lateness_us", "p50")),
    "late_10ms": ("late_10ms", ("lateness_us", "p50")),
}


def _figure(r: dict[str, Any], part: str, path: tuple[str, ...]) -> float | None:
    x: Any = r.get(part)
    for k in path:
        x = x.get(k) if isinstance(x, dict) else None
    return float(x) if isinstance(x, (int, float)) else None


def _median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of several rounds' runs: each part from the round of that figure's median."""
    ok = [r for r in rounds if "empty" in r]
    if not ok:
        return rounds[-1]
    row = dict(ok[0])
    for part, path in _FIGURES.values():
        have = sorted((v, i) for i, r in enumerate(ok) if (v := _figure(r, part, path)) is not None)
        if have:
            row[part] = ok[have[(len(have) - 1) // 2][1]][part]
    row["rounds"] = [{name: _figure(r, part, path) for name, (part, path) in _FIGURES.items()} if "empty" in r
                     else {"error": str(r.get("error") or r.get("skipped"))[:200]} for r in rounds]
    return row


def run(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {"libraries": list(LIBRARIES), "late_us": list(LATE_US), "rounds": cfg.pick(*ROUNDS), "rows": {}, "ratio": {}}
    try:
        import trio  # noqa: F401 - the trio rows need it
    except ImportError as exc:
        return {"skipped": f"trio is not installed: {exc}"}
    out["ratio_spin"] = {}
    for kind in _kinds():
        order = [r for r in RUNS if kind != "host" or not r[2]]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in order}
        for rnd in range(out["rounds"]):
            for name, lib, spin in order if rnd % 2 == 0 else order[::-1]:
                was, arig._env.TRIO_SPIN = arig._env.TRIO_SPIN, spin
                try:
                    r = anyio.run(_row, kind, cfg, backend=lib)
                except Exception as exc:  # noqa: BLE001 - one run's failure must not end the others
                    r = error_record(exc)
                finally:
                    arig._env.TRIO_SPIN = was
                runs[name].append(r)
                log(f"  trio bench {kind}/{name}, round {rnd + 1}: {_brief(r)}")
        for name in runs:
            out["rows"][f"{kind}/{name}"] = _median_row(runs[name])
        for key, name in (("ratio", "trio"), ("ratio_spin", "trio+spin")):
            if name in runs and (ratios := _ratios(runs["asyncio"], runs[name])):
                out[key][kind] = ratios
    return out


def _ratios(base: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure of ``other``'s rounds over ``base``'s, the median of the rounds' ratios."""
    ratios: dict[str, float] = {}
    for fig, (part, path) in _FIGURES.items():
        each = [t / a for ra, rt in zip(base, other) if (a := _figure(ra, part, path)) and (t := _figure(rt, part, path)) is not None]
        if each:
            ratios[fig] = float(np.median(each))
    return ratios
