"""``python3 -m examples.serve``: run the example server (see server.py)."""

import sys

try:
    from .server import main
except ModuleNotFoundError as exc:
    if exc.name not in ("starlette", "uvicorn", "httpx"):
        raise
    print(f"serve: {exc.name} is missing; the example needs starlette, uvicorn and httpx: python3 -m pip install -e '.[examples]'", file=sys.stderr)
    sys.exit(1)

sys.exit(main())
