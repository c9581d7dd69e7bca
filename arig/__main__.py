"""``python -m arig info | demo | top``, and ``--version``.

Every command ends the same way: exit status 0 when it did its job, 1 with
one line on stderr when it failed (an arig error, such as a device that does
not open), 2 for bad arguments (argparse's own status), 130 when
interrupted (Ctrl-C), and never a traceback for any of these.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

USAGE = "usage: python -m arig [--version] {info,demo,top} [options]  (each command takes --help)"

#: Exit statuses, as shells and argparse use them.
OK, FAILED, BAD_ARGUMENTS, INTERRUPTED = 0, 1, 2, 130


def _command(cmd: str) -> Callable[[list[str]], int] | None:
    if cmd == "info":
        from ._cli.info import main as info

        return info
    if cmd == "demo":
        from ._cli.demo import main as demo

        return demo
    if cmd == "top":
        from .nvrm._top import main as top

        return top
    return None


def _exit_status(code: object) -> int:
    """The status a ``SystemExit`` carries (argparse: 0 for --help, 2 for bad arguments)."""
    if code is None:
        return OK
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # SystemExit("message"), as sys.exit("message") prints it
    return FAILED


def main(argv: list[str] | None = None) -> int:
    """Run a command; return the exit status (see the module docstring)."""
    from ._errors import ArigError

    argv = sys.argv[1:] if argv is None else argv
    cmd, rest = (argv[0], argv[1:]) if argv else ("", [])
    if cmd in ("--version", "-V"):
        from . import __version__

        print(f"arig {__version__}")
        return OK
    if cmd in ("-h", "--help"):
        print(USAGE)
        return OK
    run = _command(cmd)
    if run is None:
        why = "no command given" if not cmd else f"unknown command {cmd!r}"
        print(f"arig: {why}\n{USAGE}", file=sys.stderr)
        return BAD_ARGUMENTS
    try:
        return run(rest)
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt:
        print(f"arig {cmd}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except ArigError as exc:
        print(f"arig {cmd}: {exc}", file=sys.stderr)
        return FAILED
    except BrokenPipeError:
        # The reader went away (`arig top --json | head -c 10`): say nothing more to it,
        # and let the flush at exit find somewhere to write (Python's documented recipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
