"""An example async inference server on arig, its baseline, load test and benchmark.

``python3 -m examples.serve`` serves a small MLP over HTTP (Starlette on
uvicorn) with dynamic batching; ``examples.serve.loadtest`` drives it with
httpx and checks every answer against numpy; ``examples.serve.bench`` runs
the arig server and the ``run_in_executor`` baseline in one go.  See
``examples/serve/README.md``.
"""
