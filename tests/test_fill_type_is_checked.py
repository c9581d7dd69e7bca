"""``arig.Fill`` types the fills ``Device.submit`` and ``Device.run`` take: ``mypy --strict`` on a
program accepts each kind of work a device takes and reports a fill of the wrong shape."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import arig

pytest.importorskip("mypy")

# Each line ending in "# wrong" must be reported by mypy, and no other.
PROGRAM = """
    import ctypes

    import arig
    import arig.cuda
    import arig.cuda_abi


    def fill(queue: object, arg: object, v: int) -> None:
        pass


    def fill_code(queue: object, arg: int, v: int) -> int:
        return 0


    def fill_text(queue: object, arg: object, v: int) -> str:
        return "done"


    class Callable3:
        def __call__(self, queue: object, arg: object, v: int) -> None:
            pass


    async def main(dev: arig.Device, launch: arig.cuda.Launch, graph: arig.cuda_abi.Graph) -> None:
        typed: arig.Fill = fill
        await dev.submit(typed)
        await dev.submit(fill, 1)
        await dev.submit(fill_code, 2)
        await dev.submit(lambda q, a, v: None)
        await dev.submit(Callable3(), queue=1)
        await dev.submit(None)
        await dev.submit(launch)
        await dev.submit(graph, keep=graph)
        await dev.submit(arig.cuda_abi.FILL(0x1234))
        await dev.submit(0x1234)
        await dev.run(fill)
        await dev.submit(lambda: None)  # wrong
        await dev.submit(lambda q, a: None)  # wrong
        await dev.run(fill_text)  # wrong
        await dev.submit("fill")  # wrong
        bad: arig.Fill = fill_text  # wrong
"""


def test_mypy_strict_accepts_every_kind_of_work_and_reports_wrong_fills(tmp_path: Path) -> None:
    source = textwrap.dedent(PROGRAM)
    (tmp_path / "program.py").write_text(source)
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(arig.__file__)))
    if os.path.abspath(root) != os.path.abspath(sysconfig.get_paths()["purelib"]):  # a source tree, not an install
        env["MYPYPATH"] = root
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy_cache"), "program.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    reported = sorted({int(m.group(1)) for m in re.finditer(r"^program\.py:(\d+): error", done.stdout, re.M)})
    wrong = [n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# wrong")]
    assert reported == wrong, done.stdout + done.stderr
