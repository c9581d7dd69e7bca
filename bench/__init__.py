"""arig's benchmarks: ``python -m bench [--out DIR] [--quick] [--only NAME,...]``.

See ``bench/README.md`` for what each benchmark measures.
"""
