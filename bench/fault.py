"""Benchmark 6: failure fan-out, stop and reopen, in a subprocess.

The faulted context must not poison the benchmark process (whose PyTorch
and CuPy hold the primary context), so ``run`` starts
``python -m bench.fault`` and reads the one JSON line it prints.

Each cycle in the child: open GPU 0, load the cubin, run one empty kernel;
then, without yielding to the loop (``submit`` does not suspend while
there is room), submit the ``illegal`` kernel (it stores to address 0x8)
and 100 empty kernels behind it, start 100 waiters on those values, and
time from the illegal kernel's submit until every waiter has failed with
``arig.DeviceLost`` (``fanout_ms``; ``first_fail_ms`` for the first).  Then
time a submit on the lost device (it must fail at once), ``stop()``, and
the next ``arig.open(arig.cuda.gpu(0))`` in the same process with a saxpy
checked against numpy after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run", "main"]

ROOT = Path(__file__).resolve().parent.parent


def run(cfg: Any) -> dict[str, Any]:
    repeat = cfg.pick(5, 1)
    cmd = [sys.executable, "-m", "bench.fault", "--repeat", str(repeat), "--waiters", "100"]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60 + 30 * repeat)
    except subprocess.TimeoutExpired as exc:
        # The JSON line may be out even if the process hung on its way out.
        found = _json_line(_tail(exc.stdout, 1 << 20))
        if found is not None:
            found["exit_code"] = f"killed after {exc.timeout} s"
            return found
        return {"error": f"the subprocess did not finish within {exc.timeout} s", "stderr_tail": _tail(exc.stderr)}
    out = _json_line(p.stdout)
    if out is None:
        return {"error": f"the subprocess printed no JSON (exit {p.returncode})", "stderr_tail": _tail(p.stderr), "stdout_tail": _tail(p.stdout)}
    out["exit_code"] = p.returncode
    if p.returncode:
        out["stderr_tail"] = _tail(p.stderr)
    return out


def _json_line(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                found: dict[str, Any] = json.loads(line)
                return found
            except ValueError:
                continue
    return None


def _tail(text: Any, n: int = 2000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return str(text)[-n:]


# -- the child ---------------------------------------------------------------------


def _fill(stream: int, launch: Any, v: int) -> int:
    return launch(stream)


async def _saxpy_check(dev: Any) -> dict[str, Any]:
    import arig.cuda
    from arig.cuda import Launch, pack

    n = 1 << 16
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    t0 = time.perf_counter()
    image = await dev.load(arig.cuda.shipped_image())
    bx, by = await dev.alloc(4 * n), await dev.alloc(4 * n)
    await dev.upload(bx, x)
    await dev.upload(by, y)
    t1 = time.perf_counter()
    saxpy = Launch(image.function("saxpy"), ((n + 255) // 256, 1, 1), (256, 1, 1), pack(np.float32(2.0), bx, by, np.int32(n)))
    v = await dev.submit(saxpy, keep=(image, bx, by))
    await dev.wait(v)
    t2 = time.perf_counter()
    out = np.empty_like(y)
    await dev.download(by, out)
    ok = bool(np.allclose(out, np.float32(2.0) * x + y, rtol=1e-5, atol=1e-5))
    bx.close()
    by.close()
    return {"ok": ok, "setup_ms": (t1 - t0) * 1e3, "saxpy_ms": (t2 - t1) * 1e3}


async def _cycle(dev: Any, waiters: int) -> dict[str, Any]:
    import arig
    from arig.cuda import Launch, pack, shipped_image

    image = await dev.load(shipped_image())
    illegal = Launch(image.function("illegal"), 1, 1, pack(np.uint64(0x8)))
    empty = Launch(image.function("empty"), 1, 1)
    await dev.run(_fill, empty)
    pc = time.perf_counter
    # No suspension from here to the waiters: every value is assigned before
    # the loss can reach the loop.
    t0 = pc()
    await dev.submit(_fill, illegal, keep=image)
    values = [await dev.submit(_fill, empty) for _ in range(waiters)]
    submitted = pc() - t0

    async def waiter(v: int) -> tuple[str, float, str]:
        try:
            await dev.wait(v)
            return ("completed", pc(), "")
        except arig.DeviceLost as exc:
            return ("lost", pc(), type(exc.cause).__name__ + ": " + str(exc.cause)[:160])
        except Exception as exc:  # noqa: BLE001
            return ("other", pc(), f"{type(exc).__name__}: {exc}"[:200])

    results = await asyncio.wait_for(asyncio.gather(*(waiter(v) for v in values)), 60)
    times = [t - t0 for _, t, _ in results]
    kinds = [k for k, _, _ in results]
    t = pc()
    fast: dict[str, Any]
    try:
        await dev.submit(_fill, empty)
        fast = {"raised": None}
    except arig.DeviceLost:
        fast = {"raised": "DeviceLost"}
    except Exception as exc:  # noqa: BLE001
        fast = {"raised": type(exc).__name__}
    fast["us"] = (pc() - t) * 1e6
    t = pc()
    await dev.stop()
    stop_ms = (pc() - t) * 1e3
    return {
        "waiters": waiters,
        "lost": kinds.count("lost"),
        "completed": kinds.count("completed"),
        "other": kinds.count("other"),
        "cause": next((c for k, _, c in results if k == "lost"), None),
        "submit_101_ms": submitted * 1e3,
        "first_fail_ms": min(times) * 1e3,
        "fanout_ms": max(times) * 1e3,
        "spread_ms": (max(times) - min(times)) * 1e3,
        "submit_after_loss": fast,
        "stop_ms": stop_ms,
    }


async def _child(repeat: int, waiters: int) -> dict[str, Any]:
    import arig
    import arig.cuda

    out: dict[str, Any] = {"repeat": repeat, "cycles": [], "opens": []}
    pc = time.perf_counter
    for k in range(repeat + 1):
        t = pc()
        try:
            dev = await arig.open(arig.cuda.gpu(0), stop_timeout=10)
        except Exception as exc:  # noqa: BLE001
            out["opens"].append({"after_fault": k > 0, "error": f"{type(exc).__name__}: {exc}"})
            break
        open_ms = (pc() - t) * 1e3
        rec: dict[str, Any] = {"after_fault": k > 0, "open_ms": open_ms}
        try:
            rec["saxpy"] = await _saxpy_check(dev)
        except Exception as exc:  # noqa: BLE001
            rec["saxpy"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out["opens"].append(rec)
        if k == 0:
            out["device"] = {kk: vv for kk, vv in dev.facts.items() if isinstance(vv, (int, float, str, bool, type(None)))}
        if k == repeat:
            await dev.stop()
            break
        try:
            out["cycles"].append(await _cycle(dev, waiters))
        except Exception as exc:  # noqa: BLE001
            out["cycles"].append({"error": f"{type(exc).__name__}: {exc}"})
            try:
                await dev.stop()
            except Exception:  # noqa: BLE001
                pass
    _summarize(out)
    return out


def _summarize(out: dict[str, Any]) -> None:
    """``out["summary"]`` over the cycles and opens that completed; ``out["error"]`` where none did."""
    from ._stats import summarize

    cyc = [c for c in out["cycles"] if "error" not in c]
    if not cyc:
        errs = [o["error"] for o in out["opens"] if "error" in o] + [c["error"] for c in out["cycles"] if "error" in c]
        out["error"] = errs[0] if errs else "no fault cycle completed"
    reopen = [o for o in out["opens"] if o.get("after_fault") and "open_ms" in o]
    out["summary"] = {
        "fanout_ms": summarize(c["fanout_ms"] for c in cyc),
        "first_fail_ms": summarize(c["first_fail_ms"] for c in cyc),
        "submit_after_loss_us": summarize(c["submit_after_loss"]["us"] for c in cyc),
        "stop_ms": summarize(c["stop_ms"] for c in cyc),
        "reopen_ms": summarize(o["open_ms"] for o in reopen),
        "cold_open_ms": out["opens"][0].get("open_ms") if out["opens"] else None,
        "saxpy_after_reopen_ms": summarize(o["saxpy"]["saxpy_ms"] for o in reopen if "saxpy_ms" in o.get("saxpy", {})),
        "all_waiters_lost": bool(cyc) and all(c["lost"] == c["waiters"] for c in cyc),
        "submit_after_loss_raised": sorted({str(c["submit_after_loss"]["raised"]) for c in cyc}),
        "saxpy_after_reopen_ok": bool(reopen) and all(o.get("saxpy", {}).get("ok") for o in reopen),
        # libcuda keeps an illegal address for the life of the process: arig refuses a reopen there
        # with an OpenError that says so (the README's promise), which this records.
        "reopen_refused": next((o["error"] for o in out["opens"] if o.get("after_fault") and "error" in o), None),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fault", description="failure fan-out (prints one JSON line)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--waiters", type=int, default=100)
    args = p.parse_args(argv)
    try:
        out = asyncio.run(_child(args.repeat, args.waiters))
        code = 0
    except Exception as exc:  # noqa: BLE001
        import traceback

        out = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}
        code = 1
    print(json.dumps(out), flush=True)
    sys.stderr.flush()
    # Leave at once: nothing at interpreter exit may touch a faulted context
    # (or hang there) after the result is out.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
