"""``python -m arig info | demo | top``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cmd, rest = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "info":
        from ._cli.info import main as run
    elif cmd == "demo":
        from ._cli.demo import main as run
    elif cmd == "top":
        from .nvrm._top import main as run
    else:
        print("usage: python -m arig {info,demo,top} [options]  (each takes --help)", file=sys.stderr)
        return 0 if cmd in ("-h", "--help") else 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
