"""The served model: a 2-layer MLP in float32 with weights from a fixed seed.

Server and client build the same weights from the seed, so the load test
can check every answer without asking the server for its weights.  The
reference is computed in float64 from the float32 weights and inputs; a
float32 server (numpy on the CPU, cuBLAS FP32 on a GPU, TF32 off) is within
``RTOL``/``ATOL`` of it: the error of a float32 dot product of length
``HIDDEN`` with terms of order 1 is about ``sqrt(HIDDEN) * 6e-8``, far below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IN", "HIDDEN", "OUT", "SEED", "RTOL", "ATOL", "Weights", "weights", "forward_into", "reference", "inputs"]

IN, HIDDEN, OUT = 64, 256, 16
SEED = 20240611
#: Tolerance of every answer against the float64 reference (float32 arithmetic, TF32 off on a GPU).
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Weights:
    """``y = relu(x @ w1 + b1) @ w2 + b2``; all float32, C-contiguous."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray


def weights(seed: int = SEED) -> Weights:
    """The model's weights: He-scaled so activations and outputs stay of order 1."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((IN, HIDDEN)) * np.sqrt(2.0 / IN)).astype(np.float32)
    b1 = (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, OUT)) * np.sqrt(2.0 / HIDDEN)).astype(np.float32)
    b2 = (rng.standard_normal(OUT) * 0.1).astype(np.float32)
    return Weights(w1, b1, w2, b2)


def forward_into(w: Weights, x: np.ndarray, out: np.ndarray) -> None:
    """The float32 forward pass of the batch ``x`` (n, IN) into ``out`` (n, OUT).

    Writes into ``out`` rather than returning: on the host device it runs on
    the device's worker and the caller reads ``out`` once the value is reached.
    numpy's matmul releases the GIL, so the event loop runs meanwhile.
    """
    h = x @ w.w1
    h += w.b1
    np.maximum(h, 0.0, out=h)
    np.matmul(h, w.w2, out=out)
    out += w.b2


def reference(w: Weights, x: np.ndarray) -> np.ndarray:
    """The float64 answer the load test checks float32 answers against."""
    x64 = np.asarray(x, np.float64)
    h = np.maximum(x64 @ w.w1.astype(np.float64) + w.b1, 0.0)
    y: np.ndarray = h @ w.w2.astype(np.float64) + w.b2
    return y


def inputs(n: int, seed: int = 1) -> np.ndarray:
    """``n`` random float32 inputs (n, IN): what the load test sends."""
    return np.random.default_rng(seed).standard_normal((n, IN)).astype(np.float32)
