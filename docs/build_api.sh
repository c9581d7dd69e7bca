#!/usr/bin/env bash
# Builds the API reference from the docstrings into docs/api/ (git-ignored): pdoc, run on the arig
# that Python imports (the source tree with PYTHONPATH, or an install). Needs pdoc there
# (`python3 -m pip install pdoc`, a tool only: arig does not depend on it), and pytest and
# pytest-asyncio for the plugin's page. Warnings are errors, but for the annotations pdoc cannot
# evaluate at run time (generic weakref.finalize before Python 3.13, a dataclass's string
# annotation): those are shown as written.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
rm -rf docs/api
"$PY" -W error \
  -W "ignore:Error parsing type annotation weakref.finalize[Any, Any]:UserWarning" \
  -W "ignore:Error parsing type annotation ForwardRef('tuple[Any, ...]') for arig.testing.Call:UserWarning" \
  -m pdoc arig arig.testing _arig_pytestplugin -o docs/api
echo "docs/api: $(find docs/api -name '*.html' | wc -l) pages (open docs/api/index.html)"
