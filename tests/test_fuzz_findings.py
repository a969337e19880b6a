"""Specs the structural fuzzer (tests/fuzz_specs.py) found wrong, written out as a table.

Each row is a spec with number inputs beside tensors and the same formula in torch; the
generated Function must build and match autograd in values and gradients (float64).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as nnf

import symgrad
from tests.conftest import as_tuple

K = 0.78

# name -> (outputs, the same formula in torch of x0 (shape [3]), x1 (shape [2, 1]) and k)
CASES: dict[str, tuple[dict[str, str], Callable[..., Any]]] = {
    # An activation of a number is written out; its power printed without parentheses
    # (`k * (1 + erf(...)) / 2**2`).
    "a power of an activation of a number": (
        {"y": "x0 * gelu(k)**2 + x1 / (1 + silu(k)**2)"},
        lambda x0, x1, k: x0 * nnf.gelu(torch.tensor(k, dtype=x0.dtype)) ** 2
        + x1 / (1 + nnf.silu(torch.tensor(k, dtype=x0.dtype)) ** 2),
    ),
    # A kink's masked adjoint meets a tie (`a > e | a == e`) under a number: merging the
    # routes must not differentiate the relations' sides.
    "a minimum of a number and a branch with a pole": (
        {"y": "min(k, where(softshrink(x1, 0.25) > -0.44, x1 * x0, sqrt(k**2 + 0.5)))"},
        lambda x0, x1, k: torch.minimum(
            torch.tensor(k, dtype=x0.dtype),
            torch.where(
                nnf.softshrink(x1, 0.25) > -0.44,
                x1 * x0,
                torch.tensor(k**2 + 0.5, dtype=x0.dtype).sqrt(),
            ),
        ),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_generated_function_matches_autograd(name: str) -> None:
    outputs, formula = CASES[name]
    spec = symgrad.spec_from_dict(
        {
            "name": "Finding",
            "inputs": {
                "x0": {"type": "tensor", "shape": [3]},
                "x1": {"type": "tensor", "shape": [2, 1]},
                "k": {"type": "float", "default": K},
            },
            "outputs": outputs,
        }
    )
    function = getattr(symgrad.load_module(spec), spec.module)
    generator = torch.Generator().manual_seed(0)
    x0, x1 = (
        torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)
        for shape in ((3,), (2, 1))
    )
    mine, want = as_tuple(function(x0, x1, K)), as_tuple(formula(x0, x1, K))
    for m, w in zip(mine, want, strict=True):
        torch.testing.assert_close(m, w)
    cotangents = [torch.randn(w.shape, generator=generator, dtype=torch.float64) for w in want]
    got = torch.autograd.grad(mine, (x0, x1), cotangents, allow_unused=True)
    expected = torch.autograd.grad(want, (x0, x1), cotangents, allow_unused=True)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
