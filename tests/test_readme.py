"""The README's examples run as printed: each ```python block in a fresh interpreter
(the GPU one where a GPU opens; the GPU suite runs it on the H200)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import arig.cuda

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_its_examples_and_its_two_commands() -> None:
    text = README.read_text()
    head = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert head[0].startswith("python3 -m pip install . && python3 -m arig demo")
    assert head[1].startswith("python3 -m pip install '.[test]' && python3 -m pytest")
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_example_runs_as_printed(i: int) -> None:
    code = BLOCKS[i]
    first, _, rest = code.partition("\n")
    if first.startswith("# excerpt of "):
        # An excerpt of a file CI runs: every line is that file's, in the file's order.
        source = (README.parent / first.removeprefix("# excerpt of ").strip()).read_text().splitlines()
        at = 0
        for line in rest.splitlines():
            if line.strip():
                at = source.index(line, at) + 1 if line in source[at:] else pytest.fail(f"not in {first[13:]} (in order): {line!r}")
        return
    if "arig.cuda.gpu(" in code and arig.cuda.count() == 0:
        pytest.skip("a GPU example: no NVIDIA GPU here")
    if "arig.nvrm.gpu(" in code and not os.path.exists("/dev/nvidiactl"):
        pytest.skip("an NV example: no NVIDIA kernel driver here")
    done = subprocess.run([sys.executable, "-c", code], cwd=README.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the example printed nothing"
