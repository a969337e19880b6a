"""Time single torch primitives on one device: the cost model behind save-or-recompute choices.

Each primitive runs on float32 inputs of the run's largest size; times are reported
relative to one elementwise multiplication. On a GPU all of them should cost about one
memory pass; on a CPU thread transcendental functions and general powers cost several.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as nnf

from bench.measure import time_interleaved

Tensor = torch.Tensor
aten = torch.ops.aten


@dataclass(frozen=True)
class PrimitiveCost:
    """Median seconds of one primitive, and that over a multiplication's."""

    name: str
    seconds: float
    relative: float


def _primitives(x: Tensor, p: Tensor, g: Tensor) -> dict[str, Callable[[], Tensor]]:
    """The primitives timed: x normal, p positive, g another operand."""
    return {
        "x * g": lambda: x * g,
        "x + 1": lambda: x + 1,
        "x * x": lambda: x * x,
        "x**2": lambda: x**2,
        "x**3": lambda: x**3,
        "p**6": lambda: p**6,
        "p**-7": lambda: p**-7,
        "x / p": lambda: x / p,
        "where(x > 0, x, g)": lambda: torch.where(x > 0, x, g),
        "addcmul(x, g, p)": lambda: torch.addcmul(x, g, p),
        "exp": lambda: torch.exp(x),
        "log": lambda: torch.log(p),
        "log1p": lambda: torch.log1p(p),
        "sqrt": lambda: torch.sqrt(p),
        "rsqrt": lambda: torch.rsqrt(p),
        "sin": lambda: torch.sin(x),
        "tanh": lambda: torch.tanh(x),
        "sigmoid": lambda: torch.sigmoid(x),
        "erf": lambda: torch.erf(x),
        "softplus": lambda: nnf.softplus(x),
        "tanh_backward(g, t)": lambda: aten.tanh_backward(g, x),
        "sigmoid_backward(g, s)": lambda: aten.sigmoid_backward(g, x),
        "sum(x, dim=-1)": lambda: x.sum(dim=-1),
    }


def time_primitives(elements: int, repeats: int, device: torch.device) -> list[PrimitiveCost]:
    """Median time of each primitive on `elements` float32 values, relative to x * g."""
    torch.manual_seed(0)
    x = torch.randn(elements // 1024, 1024, device=device)
    p = torch.rand_like(x) + 0.5
    g = torch.randn_like(x)
    samples = time_interleaved(_primitives(x, p, g), repeats, warmup=2, device=device)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    unit = medians["x * g"]
    return [PrimitiveCost(name, seconds, seconds / unit) for name, seconds in medians.items()]
