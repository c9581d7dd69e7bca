"""The fake driver's graphs of kernel nodes, their execs, and graph launches (lock held).

A launch runs a snapshot of its exec: later node updates reach only later launches.
"""

from __future__ import annotations

from ctypes import c_void_p
from typing import Any

from ...cuda._lib import KERNEL_NODE_PARAMS
from ._driver import _Driver
from ._objects import _addr, _fail_if, _Func, _handles, _Owned, _put


class _Graphs(_Driver):
    def _cuGraphCreate(self, p: Any, flags: int) -> None: self._new(self._graphs, p, lambda h: _Owned(h, self._current(), {}))
    def _cuGraphExecDestroy(self, h: Any) -> None: self._destroy("exec", self._execs, h)
    def _cuGraphDestroy(self, h: Any) -> None: self._destroy("graph", self._graphs, h)

    # graphs
    def _node(self, params: Any) -> tuple[_Func, bytes]:
        kp = KERNEL_NODE_PARAMS.from_address(_addr(params))
        f = self._get(self._funcs, kp.func)
        return f, self._args(f, kp.kernelParams, kp.extra)

    def _cuGraphAddKernelNode_v2(self, p: Any, h: Any, deps: Any, ndeps: int, params: Any) -> None:
        g = self._get(self._graphs, h)
        _fail_if(any((c_void_p.from_address(_addr(deps) + 8 * i).value or 0) not in g.items for i in range(ndeps)), 1)  # a dependency on no node of this graph
        node = next(_handles)
        g.items[node] = self._node(params)  # runs in insertion order: each after its dependencies
        _put(p, c_void_p, node)

    def _cuGraphInstantiateWithFlags(self, p: Any, h: Any, flags: int) -> None:
        g = self._get(self._graphs, h)
        self._new(self._execs, p, lambda e: _Owned(e, g.ctx, dict(g.items)))

    def _cuGraphExecKernelNodeSetParams_v2(self, h: Any, node: Any, params: Any) -> None:
        e, new = self._get(self._execs, h), self._node(params)
        _fail_if(e.items.get(_addr(node), (None,))[0] is not new[0], 1)  # no such node, or another function: a node's function is fixed
        e.items[_addr(node)] = new

    def _cuGraphLaunch(self, h: Any, stream: Any) -> None:
        e, s = self._get(self._execs, h), self._stream(stream, enqueue=True)
        snapshot = list(e.items.values())  # later updates reach only later launches
        self._enqueue(s, lambda: [f.fn(a) for f, a in snapshot])
