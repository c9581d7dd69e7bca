"""``python3 -m examples.serve``: run the example server (see server.py)."""

import sys

from .server import main

sys.exit(main())
