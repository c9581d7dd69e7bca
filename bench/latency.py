"""Benchmark 1: completion latency and CPU per wait, kernels of 0, 50, 200 and 1,000 µs.

One task launches one kernel and awaits its completion, again and again.
Methods (``SPECS``; the ops are in ``bench._methods``):

* ``arig``: ``v = await dev.submit(launch); await dev.wait(v)``, a prepared
  ``arig.cuda.Launch`` launched by arig's native submit thread (the fast path),
  on the default asyncio loop;
* ``arig_pyfill``: the same through a Python fill, ``dev.submit(launch_fill, launch)``;
* ``arig_pyfill_inline``: that fill run inside ``submit`` (``inline=True``), its ``Launch`` recorded;
* ``arig_uvloop``, ``arig_spinloop``: ``arig`` on ``uvloop.new_event_loop()`` and on
  ``arig.new_event_loop()`` (spins briefly on arig's completion words before blocking);
* ``raw_floor``: ctypes launch + ``cuStreamSynchronize``, no event loop;
* ``torch_executor`` (``run_in_executor(None, ev.synchronize)``), ``torch_poll``
  (``while not ev.query(): await asyncio.sleep(0)``) and ``torch_poll_uvloop``
  (the same on uvloop), ``cupy_hostfunc`` (``launch_host_func`` + ``call_soon_threadsafe``).

Every method runs in an event loop of its own: each round runs every method
in turn, each in a fresh loop (and, for arig, a fresh device opened in that
loop and stopped after), so drift of the machine spreads over all of them
and no method's threads linger while another is measured.  Per session: a
warm-up, then one block per kernel length.  Latency: submit to resumed
coroutine.  CPU per wait: process CPU (all threads) over a block / its
waits, the launch included.  Ratios are each method's median over arig's,
from this same run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from ._common import KERNEL_US, LOOPS, Config, LoopUnavailable, error_record, latency_block, log, loop_factory, loop_versions, run_in_loop
from ._methods import open_method, versions
from ._stats import ratio, summarize

__all__ = ["run", "SPECS", "Spec"]

#: Samples per block for each kernel length: full and quick.
PER_BLOCK = {0: (600, 60), 50: (400, 40), 200: (250, 25), 1000: (80, 10)}


@dataclass(frozen=True)
class Spec:
    """A row of the benchmark: ``kind`` (``bench._methods.METHOD_KINDS``) on event loop ``loop`` (``LOOPS``)."""

    name: str
    kind: str
    loop: str


SPECS = (
    Spec("arig", "arig", "asyncio"),
    Spec("arig_pyfill", "arig_pyfill", "asyncio"),
    Spec("arig_pyfill_inline", "arig_pyfill_inline", "asyncio"),
    Spec("arig_uvloop", "arig", "uvloop"),
    Spec("arig_spinloop", "arig", "spin"),
    Spec("raw_floor", "raw_floor", "asyncio"),
    Spec("torch_executor", "torch_executor", "asyncio"),
    Spec("torch_poll", "torch_poll", "asyncio"),
    Spec("torch_poll_uvloop", "torch_poll", "uvloop"),
    Spec("cupy_hostfunc", "cupy_hostfunc", "asyncio"),
)


def run(cfg: Config) -> dict[str, Any]:
    rounds = cfg.pick(5, 2)
    warm = cfg.pick(30, 5)
    out: dict[str, Any] = {"kernel_us": list(KERNEL_US), "rounds": rounds, "loops": {**loop_versions()}, "methods": {}}
    acc: dict[str, dict[int, dict[str, list[float]]]] = {s.name: {us: {"lat": [], "cpu": [], "resume": []} for us in KERNEL_US} for s in SPECS}
    info: dict[str, dict[str, Any]] = {}
    live: list[Spec] = []
    for s in SPECS:
        try:
            loop_factory(s.loop)
            live.append(s)
        except LoopUnavailable as exc:
            out["methods"][s.name] = {"skipped": f"loop {s.loop!r}: {exc}", "loop": s.loop}
    t0 = time.perf_counter()
    for r in range(rounds):
        for s in list(live):
            try:
                res = run_in_loop(s.loop, _session, s, cfg, warm)
            except ImportError as exc:
                out["methods"][s.name] = {"skipped": f"not importable: {exc}", "loop": s.loop}
                live.remove(s)
                continue
            except Exception as exc:  # noqa: BLE001 - one method's failure must not end the run
                out["methods"][s.name] = {**error_record(exc), "loop": s.loop, "round": r}
                log(f"  latency {s.name}: {out['methods'][s.name]['error']}")
                live.remove(s)
                continue
            info.setdefault(s.name, res["info"])
            for us, b in res["blocks"].items():
                d = acc[s.name][us]
                d["lat"] += b["lat"]
                d["resume"] += b["resume"]
                d["cpu"].append(b["cpu_per_op"])
        log(f"  latency round {r + 1}/{rounds} done ({time.perf_counter() - t0:.1f} s): {', '.join(_brief(acc, s.name) for s in live)}")
    for s in live:
        per = {}
        for us in KERNEL_US:
            d = acc[s.name][us]
            lat = summarize(d["lat"], 1e6)
            per[str(us)] = {
                "latency_us": lat,
                "overhead_us": (lat["median"] - us) if lat.get("n") else None,
                "cpu_us_per_wait": summarize(d["cpu"], 1e6),
            }
            if d["resume"]:
                per[str(us)]["report_to_resume_us"] = summarize(d["resume"], 1e6)
        i = info.get(s.name, {})
        out["methods"][s.name] = {"what": i.get("what"), "kind": s.kind, "loop": s.loop, "loop_class": i.get("loop_class"), "by_kernel_us": per}
        if i.get("completion") is not None:
            out["methods"][s.name]["completion"] = i["completion"]
        if s.name == "arig" and i.get("facts"):
            out["device"] = i["facts"]
    out["versions"] = versions()
    _ratios(out)
    return out


async def _session(s: Spec, cfg: Config, warm: int) -> dict[str, Any]:
    """One method in the running (fresh) loop: open it, warm up, one block per kernel length, close it."""
    async with open_method(s.kind, s.name) as m:
        facts = m.facts or {}
        info = {"what": f"{m.what} [loop: {LOOPS[s.loop]}]", "loop_class": m.loop, "completion": facts.get("completion"), "facts": facts or None}
        ops = {us: m.make_op(us) for us in KERNEL_US}
        for us in KERNEL_US:  # warm-up, discarded
            await asyncio.wait_for(latency_block(ops[us], warm), 60)
        blocks = {}
        for us in KERNEL_US:
            blocks[us] = await asyncio.wait_for(latency_block(ops[us], PER_BLOCK[us][1 if cfg.quick else 0]), 120)
    return {"info": info, "blocks": blocks}


def _brief(acc: dict[str, Any], name: str) -> str:
    lat = acc[name][0]["lat"]
    return f"{name} {summarize(lat, 1e6).get('median', float('nan')):.1f}" if lat else name


def _ratios(out: dict[str, Any]) -> None:
    """Each method's median latency and CPU per wait over arig's, per kernel length."""
    base = out["methods"].get("arig", {}).get("by_kernel_us")
    if not base:
        return
    for name, m in out["methods"].items():
        per = m.get("by_kernel_us")
        if name == "arig" or not per:
            continue
        m["vs_arig"] = {
            us: {
                "latency": ratio(per[us]["latency_us"], base[us]["latency_us"]),
                "cpu_per_wait": ratio(per[us]["cpu_us_per_wait"], base[us]["cpu_us_per_wait"]),
            }
            for us in per
            if us in base
        }
