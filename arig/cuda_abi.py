"""The CUDA ABI record: what compiled code finds under ``arig.cuda_abi.KEY``.

``FILL``, ``Kernel``, ``Graph``, ``CudaAbi`` (``symbol``, ``graph``,
``graph_async``), ``KEY`` and ``declare``; defined in ``arig.cuda._abi``.
"""

from __future__ import annotations

from .cuda._abi import FILL, KEY, CudaAbi, Graph, Kernel, declare
from .cuda._abi import _Key as _Key  # tests make keys of their own

__all__ = ["FILL", "KEY", "Kernel", "Graph", "CudaAbi", "declare"]

