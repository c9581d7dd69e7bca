"""The length sweep: how late a wait resumes, from empty kernels to 50 ms ones (GPU).

One task runs ``v = await dev.submit(launch); await dev.wait(v)`` again and again, for kernels of
``_lateness.LENGTHS_US`` (0: ``empty``; otherwise ``spin_stamped(ns, slots, i)``, which spins on
the GPU's global timer and writes its own start and end into slot ``i``).  Each sample's
lateness is its latency (submit start to resumed coroutine) less the kernel's own GPU length
from its slot: what waiting adds beyond the work.  The slots of a block are one device buffer,
zeroed before it and read back once after it (no readback between samples).

* ``rows``: CUDA (``arig.cuda.gpu(0)``) and NV (``arig.nvrm.gpu(0)``) × asyncio, uvloop and
  ``arig.new_event_loop()`` (``bench._common.LOOPS``), each in a fresh loop with a fresh device:
  per length, lateness p50/p90/p99/max, the median GPU length, process CPU per wait and the
  deltas of the engine's counters over the block;
* ``baselines``: the same lengths on CUDA through PyTorch (the same cubin's ``spin_stamped``
  launched with ``cuLaunchKernel`` on a torch stream, stamps in a torch tensor): busy poll
  (``while not ev.query(): await asyncio.sleep(0)``) and the executor
  (``await loop.run_in_executor(None, ev.synchronize)``); skipped with a note without torch;
* ``never_seen``: the first wait of work the engine has no prediction for (it predicts by kernel
  and grid, not arguments): every sample a grid no launch of the device had, at 1 and 10 ms;
* ``tail``: 10,000 waits of mixed lengths (``TAIL_MIX``, fixed seed) on both devices, asyncio
  and uvloop: p50/p99/p99.9/max lateness and how many were later than 1 ms; and the same waits
  through PyTorch's busy poll (``torch_poll/asyncio``), the floor of a core that spins on them.

Every part is sized against the run's ``--max-seconds`` (``Config.left``): a part that does not
fit is skipped, and a tail that does not fit whole is shortened, with a note saying so.
Threads: everything runs on the main thread, in the loops it makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._common import Config, LoopUnavailable, error_record, log, loop_factory, loop_name, loop_versions, run_in_loop
from ._lateness import (
    LENGTHS_US, NEVER_SEEN_K, NEVER_SEEN_US, TAIL_MIX, TAIL_N, TAIL_SEED, counter_delta, fit_count, gpu_lengths_us,
    late_summary, length_row, mix_mean_us, samples, seconds_of, tail_lengths, tail_summary, warm,
)

__all__ = ["run", "DEVICES", "SWEEP_LOOPS", "TAIL_LOOPS", "ArigTarget", "TorchTarget", "measure"]

CUBIN = Path(__file__).resolve().parent.parent / "arig" / "kernels" / "kernels.cubin"
#: The devices and loops of the rows; the tail's loops.
DEVICES = ("cuda", "nv")
SWEEP_LOOPS = ("asyncio", "uvloop", "spin")
TAIL_LOOPS = ("asyncio", "uvloop")
#: Seconds kept free at the end of the budget for the report and the plots.
RESERVE_S = 8.0
#: Seconds a fresh device (and loop) takes to open, load and stop, at most about.
OPEN_S = 3.0

Once = Callable[[Any], Awaitable[None]]


# -- what is measured: an arig device, or PyTorch -------------------------------------


def _image(kind: str) -> bytes:
    """The sm_90 cubin both devices load (the NV device takes cubins only)."""
    return CUBIN.read_bytes()


def _opener(kind: str) -> Any:
    if kind == "nv":
        import arig.nvrm

        return arig.nvrm.gpu(0)
    import arig.cuda

    return arig.cuda.gpu(0)


def _launch_type(kind: str) -> Any:
    if kind == "nv":
        import arig.nvrm

        return arig.nvrm.Launch
    import arig.cuda

    return arig.cuda.Launch


class ArigTarget:
    """An arig device with the cubin loaded: slots are a device buffer, launches prepared ``Launch``es."""

    def __init__(self, dev: Any, image: Any, kind: str) -> None:
        from arig.cuda import pack

        Launch = _launch_type(kind)
        self.dev, self.kind, self.pack, self.Launch = dev, kind, pack, Launch
        self.image = image  # its launches name its functions: the image must outlive them (a dropped one is unloaded)
        self.stamped = image.function("spin_stamped")
        self.empty_fn = image.function("empty")
        self.empty = Launch(self.empty_fn, 1, 1, b"")

    async def slots(self, n: int) -> Any:
        buf = await self.dev.alloc(16 * n)
        await self.dev.upload(buf, np.zeros(2 * n, dtype=np.uint64))
        return buf

    def launch(self, us: int, slots: Any, i: int, grid: int = 1) -> Any:
        if us == 0:
            return self.empty if grid == 1 else self.Launch(self.empty_fn, grid, 1, b"")
        return self.Launch(self.stamped, grid, 1, self.pack(np.uint64(us * 1000), np.uint64(slots.address), np.uint32(i)))

    def op(self) -> Once:
        submit, wait = self.dev.submit, self.dev.wait

        async def once(launch: Any) -> None:
            await wait(await submit(launch))

        return once

    async def read(self, slots: Any, n: int) -> np.ndarray[Any, Any]:
        out = np.zeros(2 * n, dtype=np.uint64)
        await self.dev.download(slots, out)
        return out

    def free(self, slots: Any) -> None:
        slots.close()

    def counters(self) -> dict[str, int] | None:
        """The engine's counters (the native core's; the pure engine has none): no public
        accessor exists, so this reads the backend's completion object as the probes do."""
        completion = getattr(getattr(self.dev, "_backend", None), "completion", None)
        stats = getattr(completion, "stats", None)
        return dict(stats()) if callable(stats) else None


class TorchTarget:
    """PyTorch on GPU 0: the cubin's ``spin_stamped`` (loaded through ctypes, ``bench._cuda``) launched
    on a torch stream, then ``ev.record(stream)`` and a busy poll (``poll``) or the executor."""

    def __init__(self, mode: str) -> None:
        from arig.cuda import pack

        from ._cuda import get_raw
        from ._methods import torch_lib

        self.t = torch_lib()  # ImportError without torch
        self.raw = get_raw()
        self.raw.make_current()
        self.mode, self.pack, self.torch = mode, pack, self.t.torch
        self.stamped = self.raw.function("spin_stamped")
        self.empty = self.raw.launch("empty")
        self.ev = self.t.event()

    async def slots(self, n: int) -> Any:
        x = self.torch.zeros(2 * n, dtype=self.torch.int64, device="cuda:0")
        self.torch.cuda.synchronize()  # the zeros are written (on torch's current stream) before any kernel
        return x

    def launch(self, us: int, slots: Any, i: int, grid: int = 1) -> Any:
        if us == 0:
            return self.empty if grid == 1 else self.raw.launch("empty", grid=grid)
        return self.raw.launch("spin_stamped", self.pack(np.uint64(us * 1000), np.uint64(slots.data_ptr()), np.uint32(i)), grid=grid)

    def op(self) -> Once:
        ev, stream, h, check = self.ev, self.t.stream, self.t.stream.cuda_stream, self.raw.check
        sleep = asyncio.sleep
        if self.mode == "poll":

            async def once(launch: Any) -> None:
                rc = launch(h)
                if rc:
                    check(rc, "cuLaunchKernel")
                ev.record(stream)
                while not ev.query():
                    await sleep(0)

            return once
        loop = asyncio.get_running_loop()

        async def in_executor(launch: Any) -> None:
            rc = launch(h)
            if rc:
                check(rc, "cuLaunchKernel")
            ev.record(stream)
            await loop.run_in_executor(None, ev.synchronize)

        return in_executor

    async def read(self, slots: Any, n: int) -> np.ndarray[Any, Any]:
        self.t.stream.synchronize()
        out: np.ndarray[Any, Any] = slots.cpu().numpy().view(np.uint64)
        return out

    def free(self, slots: Any) -> None:
        return None

    def counters(self) -> dict[str, int] | None:
        return None


async def measure(target: Any, lengths_us: Sequence[int], grids: Sequence[int] | None = None) -> dict[str, Any]:
    """One block: a wait per length (sample ``i`` stamps slot ``i``, with grid ``grids[i]``),
    each latency, the slots read back once after, the process CPU and the counters' deltas."""
    n = len(lengths_us)
    slots = await target.slots(n)
    try:
        launches = [target.launch(us, slots, i, 1 if grids is None else grids[i]) for i, us in enumerate(lengths_us)]
        once = target.op()
        lat = [0.0] * n
        pc = time.perf_counter
        s0 = target.counters()
        c0 = time.process_time()
        for i, launch in enumerate(launches):
            t = pc()
            await once(launch)
            lat[i] = pc() - t
        cpu = time.process_time() - c0
        s1 = target.counters()
        stamps = await target.read(slots, n)
    finally:
        target.free(slots)
    return {"lat": lat, "stamps": stamps, "cpu_s": cpu, "counters": None if s0 is None or s1 is None else counter_delta(s0, s1)}


def _figures(m: dict[str, Any], lengths_us: Sequence[int]) -> dict[str, Any]:
    return length_row(m["lat"], m["stamps"], lengths_us, m["cpu_s"], m["counters"])


def _lateness(m: dict[str, Any], lengths_us: Sequence[int]) -> np.ndarray[Any, Any]:
    late: np.ndarray[Any, Any] = np.asarray(m["lat"], dtype=np.float64) * 1e6 - gpu_lengths_us(m["stamps"], lengths_us)
    return late


@contextlib.asynccontextmanager
async def _arig(kind: str) -> AsyncIterator[ArigTarget]:
    import arig

    dev = await arig.open(_opener(kind))
    try:
        img = await dev.load(_image(kind))
        yield ArigTarget(dev, img, kind)
    finally:
        await dev.stop()


# -- the parts ---------------------------------------------------------------------


async def _sweep(target: Any, cfg: Config) -> dict[str, Any]:
    """Per length: a warm-up, then the measured block.  The warm-up's lateness is kept apart
    (``warm_up``): it shows how many waits the prediction took to follow the new length."""
    per: dict[str, Any] = {}
    for us in LENGTHS_US:
        w, n = warm(us, cfg.quick), samples(us, cfg.quick)
        first = None
        if w:
            mw = await asyncio.wait_for(measure(target, [us] * w), 60 + seconds_of([us] * w) * 3)
            first = {"n": w, "lateness_us": late_summary(_lateness(mw, [us] * w)), "first_us": round(float(_lateness(mw, [us] * w)[0]), 2)}
        m = await asyncio.wait_for(measure(target, [us] * n), 60 + seconds_of([us] * n) * 3)
        per[str(us)] = _figures(m, [us] * n)
        if first is not None:
            per[str(us)]["warm_up"] = first
    return per


def _about(target: ArigTarget, loop: str) -> dict[str, Any]:
    dev = target.dev
    return {"device": dev.name, "kind": target.kind, "loop": loop, "loop_class": loop_name(), "completion": dev.facts.get("completion")}


async def _row(kind: str, loop: str, cfg: Config) -> dict[str, Any]:
    async with _arig(kind) as target:
        return {**_about(target, loop), "by_length_us": await _sweep(target, cfg)}


async def _baseline(mode: str, cfg: Config) -> dict[str, Any]:
    target = TorchTarget(mode)
    what = ("launch on a torch stream, ev.record(stream), "
            + ("while not ev.query(): await asyncio.sleep(0)" if mode == "poll" else "await loop.run_in_executor(None, ev.synchronize)"))
    return {"what": what, "loop": "asyncio", "loop_class": loop_name(), "torch": target.t.version, "by_length_us": await _sweep(target, cfg)}


async def _never_seen(kind: str, cfg: Config) -> dict[str, Any]:
    """First waits of unpredicted work: after a warm-up at grid 1, sample ``i`` of each length
    runs a grid of ``base + i`` blocks that no launch of this device had (each length its own
    range, so the 10 ms series never meets a grid the 1 ms one taught)."""
    k = NEVER_SEEN_K[1 if cfg.quick else 0]
    async with _arig(kind) as target:
        out = {**_about(target, "asyncio"), "first_waits": k}
        await measure(target, [0] * 20)
        await measure(target, [1_000] * 5)
        per: dict[str, Any] = {}
        base = 2
        for us in NEVER_SEEN_US:
            grids = list(range(base, base + k))
            base += k
            lengths = [us] * k
            m = await asyncio.wait_for(measure(target, lengths, grids), 60 + seconds_of(lengths) * 3)
            row = _figures(m, lengths)
            row["grids"] = [grids[0], grids[-1]]
            row["lateness_each_us"] = [round(float(x), 2) for x in _lateness(m, lengths)]
            per[str(us)] = row
        out["by_length_us"] = per
        return out


@contextlib.asynccontextmanager
async def _torch_poll() -> AsyncIterator[TorchTarget]:
    yield TorchTarget("poll")


async def _tail(kind: str, loop: str, n: int, cfg: Config) -> dict[str, Any]:
    """The mixed tail on an arig device (``kind`` ``cuda``/``nv``), or through PyTorch's busy poll
    (``torch_poll``: the floor a core spinning on the completion reaches for the same work)."""
    lengths = tail_lengths(n)
    async with (_torch_poll() if kind == "torch_poll" else _arig(kind)) as target:
        about = _about(target, loop) if isinstance(target, ArigTarget) else {"kind": kind, "loop": loop, "loop_class": loop_name(), "torch": target.t.version}
        out = {**about, "n": n, "mix": {str(k): v for k, v in TAIL_MIX.items()}, "mix_mean_us": mix_mean_us(), "seed": TAIL_SEED}
        await measure(target, tail_lengths(cfg.pick(300, 30), seed=TAIL_SEED + 1))  # warm-up: the mix's predictions settle
        m = await asyncio.wait_for(measure(target, lengths), 60 + seconds_of(lengths) * 3)
        late = _lateness(m, lengths)
        gpu = gpu_lengths_us(m["stamps"], lengths)
        out.update(tail_summary(late, lengths))
        out["stamps_missing"] = int(np.count_nonzero(~np.isfinite(gpu)))
        out["cpu_us_per_wait"] = m["cpu_s"] * 1e6 / n
        out["counters"] = m["counters"]
        return out


# -- running the parts, each in a fresh loop, each failure recorded --------------------


def _in_loop(loop: str, fn: Callable[..., Awaitable[dict[str, Any]]], *args: Any) -> dict[str, Any]:
    """``fn(*args)`` in a fresh loop of ``loop``; a missing loop or library is a skip, a failure an error row."""
    try:
        loop_factory(loop)
        return run_in_loop(loop, fn, *args)  # type: ignore[no-any-return]
    except LoopUnavailable as exc:
        return {"skipped": f"loop {loop!r}: {exc}", "loop": loop}
    except ImportError as exc:
        return {"skipped": f"not importable: {exc}", "loop": loop}
    except Exception as exc:  # noqa: BLE001 - one row's failure must not end the sweep
        return {**error_record(exc), "loop": loop}


def _sweep_seconds(cfg: Config) -> float:
    lengths = [us for us in LENGTHS_US for _ in range(samples(us, cfg.quick) + warm(us, cfg.quick))]
    return seconds_of(lengths) + OPEN_S


def _fits(cfg: Config, seconds: float) -> str | None:
    left = cfg.left() - RESERVE_S
    return None if seconds <= left else f"skipped: needs about {seconds:.0f} s, {max(0.0, left):.0f} s of the --max-seconds budget left"


def _brief(r: dict[str, Any]) -> str:
    per = r.get("by_length_us")
    if not per:
        return str(r.get("error") or r.get("skipped"))[:100]
    return ", ".join(f"{us}: {(x.get('lateness_us') or {}).get('p50', float('nan')):.0f}/{(x.get('lateness_us') or {}).get('p99', float('nan')):.0f}"
                     for us, x in per.items())


def _rows(cfg: Config, out: dict[str, Any]) -> None:
    for kind in DEVICES:
        for loop in SWEEP_LOOPS:
            name = f"{kind}/{loop}"
            why = _fits(cfg, _sweep_seconds(cfg))
            out["rows"][name] = {"skipped": why, "loop": loop} if why else _in_loop(loop, _row, kind, loop, cfg)
            log(f"  sweep {name} lateness p50/p99 µs by length: {_brief(out['rows'][name])}")


def _baselines(cfg: Config, out: dict[str, Any]) -> None:
    for name, mode in (("torch_poll", "poll"), ("torch_executor", "executor")):
        why = _fits(cfg, _sweep_seconds(cfg))
        out["baselines"][name] = {"skipped": why, "loop": "asyncio"} if why else _in_loop("asyncio", _baseline, mode, cfg)
        log(f"  sweep {name} lateness p50/p99 µs by length: {_brief(out['baselines'][name])}")
        if "skipped" in out["baselines"][name] and "not importable" in str(out["baselines"][name]["skipped"]):
            out["baselines"]["torch_executor"] = dict(out["baselines"][name])
            break


def _never_seen_all(cfg: Config, out: dict[str, Any]) -> None:
    k = NEVER_SEEN_K[1 if cfg.quick else 0]
    for kind in DEVICES:
        why = _fits(cfg, seconds_of([us for us in NEVER_SEEN_US for _ in range(k)] + [1_000] * 5) + OPEN_S)
        r: dict[str, Any] = {"skipped": why, "loop": "asyncio"} if why else _in_loop("asyncio", _never_seen, kind, cfg)
        out["never_seen"][kind] = r
        seen = "; ".join(f"{us} µs p50 {x['lateness_us'].get('p50', float('nan')):.0f} max {x['lateness_us'].get('max', float('nan')):.0f}"
                         for us, x in (r.get("by_length_us") or {}).items())
        log(f"  sweep never seen {kind}: {seen or _brief(r)}")


def _tails(cfg: Config, out: dict[str, Any]) -> None:
    want = TAIL_N[1 if cfg.quick else 0]
    per_wait = (mix_mean_us() + 150.0) / 1e6  # the wait, its lateness and the launch made before the block
    runs = [(kind, loop) for kind in DEVICES for loop in TAIL_LOOPS] + [("torch_poll", "asyncio")]
    for j, (kind, loop) in enumerate(runs):
        name = f"{kind}/{loop}"
        share = (cfg.left() - RESERVE_S) / (len(runs) - j) - OPEN_S
        n, note = fit_count(want, per_wait, share)
        if n == 0:
            out["tail"][name] = {"skipped": note, "loop": loop, "n_wanted": want}
        else:
            r = _in_loop(loop, _tail, kind, loop, n, cfg)
            r["n_wanted"] = want
            if note:
                r["note"] = note
            out["tail"][name] = r
        r = out["tail"][name]
        log(f"  sweep tail {name}: " + (f"n {r['n']} p50 {r.get('p50', 0):.0f} p99 {r.get('p99', 0):.0f} p99.9 {r.get('p999', 0):.0f} max {r.get('max', 0):.0f} µs, "
                                       f"{r.get('late_over_1ms')} later than 1 ms" if "n" in r else str(r.get("error") or r.get("skipped"))[:100]))


def run(cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lengths_us": list(LENGTHS_US),
        "samples": {str(us): samples(us, cfg.quick) for us in LENGTHS_US},
        "warm": {str(us): warm(us, cfg.quick) for us in LENGTHS_US},
        "cubin": str(CUBIN.relative_to(CUBIN.parent.parent.parent)),
        "kernel": "spin_stamped(ns, slots, i) (0 µs: empty); lateness = latency − the kernel's own GPU length (end − start, global timer)",
        "loops": loop_versions(),
        "tail_mix": {str(k): v for k, v in TAIL_MIX.items()}, "tail_mix_mean_us": mix_mean_us(), "tail_seed": TAIL_SEED,
        "rows": {}, "baselines": {}, "never_seen": {}, "tail": {},
    }
    _rows(cfg, out)
    _baselines(cfg, out)
    _never_seen_all(cfg, out)
    _tails(cfg, out)
    return out
