"""``python -m bench [--out DIR] [--quick] [--only NAME,...]``: run arig's benchmarks.

Runs every benchmark the machine can: the host device always, the CUDA
ones where ``arig.cuda.count() > 0``, the PyTorch/CuPy baselines where they
import.  Prints a table and writes ``DIR/results.json``, ``DIR/table.md``
and up to four PNGs (when matplotlib imports): six files at most.
``results.json`` is rewritten after every benchmark, so a run cut short
keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import faulthandler
import gc
import importlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ._common import Config, error_record, log
from ._cuda import gpu_name

#: name -> (module, needs a CUDA GPU), in the order they run.  The fault
#: benchmark runs first in its own process; idle and arig-only loop work run
#: before PyTorch and CuPy are first imported (by latency).  idle measures
#: the CUDA device where there is a GPU and the host device everywhere; trio
#: (asyncio beside trio) the host device everywhere, CUDA and NV where they open.
BENCHMARKS: dict[str, tuple[str, bool]] = {
    "host": ("bench.host", False),
    "trio": ("bench.under_trio", False),
    "fault": ("bench.fault", True),
    "idle": ("bench.idle", False),
    "loop": ("bench.loop", True),
    "latency": ("bench.latency", True),
    "concurrency": ("bench.concurrency", True),
    "submit": ("bench.submit", True),
    "replay": ("bench.replay", True),
    "interop": ("bench.interop", True),
    "nv": ("bench.nv", True),
    "sweep": ("bench.sweep", True),
    "peers": ("bench.peers", True),
}

ROOT = Path(__file__).resolve().parent.parent


class Results:
    """The results dict and its file, written atomically (also from the watchdog)."""

    def __init__(self, out_dir: Path, data: dict[str, Any]) -> None:
        self.path = out_dir / "results.json"
        self.data = data
        self._lock = threading.Lock()

    def write(self) -> None:
        with self._lock:
            for _ in range(5):
                try:
                    text = json.dumps(self.data, indent=1, default=_jsonable)
                    break
                except RuntimeError:  # changed during iteration (the watchdog's write)
                    time.sleep(0.05)
            else:
                return
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.path)


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return repr(x)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git() -> str:
    """The commit measured: ``ARIG_COMMIT`` where the GPU script names it (a copied
    working tree may carry a stale .git), else git's own answer."""
    named = os.environ.get("ARIG_COMMIT")
    if named:
        return named
    try:
        p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        return p.stdout.strip() + ("+dirty" if dirty else "") if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _meta(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    import numpy

    import arig

    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "arig": arig.__version__,
        "git": _git(),
        "quick": bool(args.quick),
        "argv": sys.argv[1:],
        "selected": names,
        "gpu": None,
        "env": {k: v for k, v in os.environ.items() if k.startswith("ARIG_")},
    }


def _gpu_count() -> tuple[int, str | None]:
    try:
        import arig.cuda

        return arig.cuda.count(), None
    except Exception as exc:  # noqa: BLE001
        return 0, f"{type(exc).__name__}: {exc}"


def _watchdog(seconds: float, results: Results, state: dict[str, Any], out_dir: Path) -> threading.Timer:
    def fire() -> None:
        log(f"ran past --max-seconds {seconds:.0f} during {state.get('current')}: writing what is done and exiting")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        results.data["meta"]["aborted"] = f"ran past --max-seconds {seconds:.0f} during {state.get('current')}"
        results.data["benchmarks"].setdefault(str(state.get("current")), {"error": "aborted: ran past --max-seconds"})
        try:
            results.write()
            _finish(results, out_dir, plots=False)
        finally:
            os._exit(3)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


def _finish(results: Results, out_dir: Path, plots: bool = True) -> None:
    from ._plots import plots as make_plots
    from .report import goals, table

    try:
        results.data["goals"] = goals(results.data)
    except Exception as exc:  # noqa: BLE001 - the table still prints
        results.data["goals"] = [error_record(exc)]
    if plots:
        results.data["meta"]["plots"] = make_plots(results.data, out_dir)
    text = table(results.data)
    (out_dir / "table.md").write_text(text + "\n")
    results.write()
    print(text, flush=True)


def _prepare_gpu(meta: dict[str, Any], names: list[str]) -> tuple[int, str | None]:
    """How many CUDA GPUs there are (and why none) where a chosen benchmark needs one; with
    one, its name in ``meta`` and the raw context made current on this thread for the run."""
    gpus, why = (_gpu_count() if any(BENCHMARKS[n][1] for n in names) else (0, "not asked"))
    meta["cuda_gpus"] = gpus
    if gpus:
        meta["gpu"] = gpu_name()
        try:
            from ._cuda import get_raw

            get_raw()  # the primary context, held and current on this thread for the whole run
        except Exception as exc:  # noqa: BLE001
            meta["raw_cuda_error"] = error_record(exc)
    return gpus, why


def _run_one(name: str, module: str, cfg: Config) -> dict[str, Any]:
    """One benchmark's results (its error record where it raised), with how long it took."""
    log(f"{name}: start")
    t0 = time.perf_counter()
    try:
        res: dict[str, Any] = importlib.import_module(module).run(cfg)
    except Exception as exc:  # noqa: BLE001 - one benchmark's failure must not end the run
        res = error_record(exc)
        log(f"{name}: {res['error']}")
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", default=str(ROOT / "out" / "bench"), help="directory for results.json, table.md and the PNGs (default: out/bench)")
    p.add_argument("--quick", action="store_true", help="CI-sized runs (seconds)")
    p.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    p.add_argument("--max-seconds", type=float, default=None, help="give up (keeping what is done) after this long (default: 480, quick: 120)")
    args = p.parse_args(argv)

    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {unknown}: choose from {', '.join(BENCHMARKS)}")
    names = [n for n in BENCHMARKS if n in names]  # run in the fixed order
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = Results(out_dir, {"meta": _meta(args, names), "benchmarks": {}})
    meta, benches = results.data["meta"], results.data["benchmarks"]
    state: dict[str, Any] = {"current": "setup"}
    max_s = args.max_seconds if args.max_seconds is not None else (120.0 if args.quick else 480.0)
    dog = _watchdog(max_s, results, state, out_dir)
    t_start = time.perf_counter()
    cfg = Config(quick=args.quick, deadline=t_start + max_s)

    gpus, why = _prepare_gpu(meta, names)
    results.write()

    for name in names:
        module, needs_gpu = BENCHMARKS[name]
        if needs_gpu and not gpus:
            benches[name] = {"skipped": "no CUDA GPU here (arig.cuda.count() == 0)" + (f": {why}" if why and why != "not asked" else "")}
            continue
        state["current"] = name
        benches[name] = _run_one(name, module, cfg)
        log(f"{name}: done in {benches[name]['seconds']:.1f} s")
        gc.collect()
        results.write()

    state["current"] = "report"
    meta["seconds"] = round(time.perf_counter() - t_start, 2)
    try:
        from ._common import loop_versions
        from ._methods import versions

        meta["versions"] = {**versions(), **loop_versions()}
    except Exception:  # noqa: BLE001
        pass
    _finish(results, out_dir)
    dog.cancel()
    failed = [n for n, r in benches.items() if isinstance(r, dict) and "error" in r]
    if failed:
        log(f"benchmarks that failed: {failed} (see results.json)")
    log(f"wrote {out_dir} in {meta['seconds']:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
