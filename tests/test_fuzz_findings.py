"""Specs the structural fuzzer (tests/fuzz_specs.py) found wrong, written out as a table.

Each row is a spec over tensors (and a number input) and the same formula in torch; the
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
    # Dropping a number's witness folded `0 * (...)`, and the tensors' shapes went with it.
    "a number's cancelled factor times a cancelled tensor term": (
        {"y": "max((k - k + 0 * k) * ((x0 - x0 + 0 * x1) - (x0 - x0 + 0 * x1) + 1), tanh(x0))"},
        lambda x0, x1, k: torch.maximum(
            (k - k + 0 * k) * ((x0 - x0 + 0 * x1) - (x0 - x0 + 0 * x1) + 1), torch.tanh(x0)
        ),
    ),
    # A branch's guard set a contraction's operand by a where() of the condition's shape,
    # which changed the operand's rank (fuzz seed 290642).
    "a contraction in a guarded branch": (
        {"y": 'where(x1 > 0, 0 * x0, atan2(einsum("i,i->", x0, x0), 1 + x1**2))'},
        lambda x0, x1, k: torch.where(
            x1 > 0, 0 * x0, torch.atan2(torch.einsum("i,i->", x0, x0), 1 + x1**2)
        ),
    ),
    # The layer norm kernel reads its argument's shape: a quotient printed twice without
    # parentheses read the shape of its last factor. The two layer norms cancel, so the
    # forward computes only the rstd, a shape witness, and the quotient is not named
    # (fuzz seeds 744981 and 745215).
    "a cancelled layer norm of a quotient": (
        {"y": "layer_norm(x0 / (1 + x1**2), 0.1) - layer_norm(x0 / (1 + x1**2), 0.1) + x0"},
        lambda x0, x1, k: nnf.layer_norm(x0 / (1 + x1**2), [3], eps=0.1)
        - nnf.layer_norm(x0 / (1 + x1**2), [3], eps=0.1)
        + x0,
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
        torch.testing.assert_close(m, w, rtol=1e-12, atol=1e-12)
    cotangents = [torch.randn(w.shape, generator=generator, dtype=torch.float64) for w in want]
    got = torch.autograd.grad(mine, (x0, x1), cotangents, allow_unused=True)
    expected = torch.autograd.grad(want, (x0, x1), cotangents, allow_unused=True)
    for g, e in zip(got, expected, strict=True):
        # float64 throughout: a step in float32 shows as an error near 1e-8.
        torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)


def test_a_cancelled_term_beside_a_condition_keeps_the_dtype_in_double_backward() -> None:
    """Zeros of a cancelled term shaped like a branch's condition were a bool, and the
    backward's arithmetic on them ran in the default float32: gradgradcheck failed."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Finding",
            "inputs": {
                "x0": {"type": "tensor", "shape": [2]},
                "x1": {"type": "tensor", "shape": []},
                "x2": {"type": "tensor", "shape": [2]},
                "k": {"type": "float", "default": 0.42},
            },
            "where": {
                "w0": "where(erf(k) > 0.14, x1, sum(x2, dim=-1, keepdim=True))",
                "w1": "gelu(min(w0, w0))",
            },
            "outputs": {
                "y0": "where(elu(x1, 0.5) > 0.3, x2 * x0**2, hardswish(0 * w1 + x1))",
                "y1": "clamp(x1, -0.5, 0.5) - mish(sigmoid(k))",
            },
        }
    )
    function = getattr(symgrad.load_module(spec), spec.module)
    inputs = (
        torch.tensor([0.8008, 0.2044], dtype=torch.float64, requires_grad=True),
        torch.tensor(-0.4188, dtype=torch.float64, requires_grad=True),
        torch.tensor([0.7407, -0.8847], dtype=torch.float64, requires_grad=True),
    )
    assert torch.autograd.gradgradcheck(lambda *t: function(*t, 0.42), inputs)


def _index_finding(outputs: dict[str, str]) -> Callable[..., Any]:
    """The Function of `outputs` over x0 (shape [3]), an index i (shape [3]) and k."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Finding",
            "inputs": {
                "x0": {"type": "tensor", "shape": [3]},
                "i": {"type": "index", "shape": [3]},
                "k": {"type": "float", "default": K},
            },
            "outputs": outputs,
        }
    )
    return getattr(symgrad.load_module(spec), spec.module)  # type: ignore[no-any-return]


# name -> (outputs, the same formula in torch of x0, i and k)
INDEX_CASES: dict[str, tuple[dict[str, str], Callable[..., Any]]] = {
    # The argument's terms cancel to a number broadcast like x0; the segment sum itself
    # was then broadcast with its index as well, [2] against [3] (fuzzer seed 500362).
    "a segment sum of a cancelled argument": (
        {"y": "segment_sum((1 + x0**2) * k / (1 + x0**2), i, 0, 2)"},
        lambda x0, i, k: x0.new_zeros(2).index_add(0, i, k + 0 * x0),
    ),
    # A segment sum in a where branch with a pole: the guard of the untaken branch made
    # the index a where() of the condition's shape, no longer a vector (seed 500391).
    # The reference guards the pole by hand, as the generated backward does.
    "a segment sum in a guarded branch": (
        {"y": "where(x0 > 0, x0, log(-x0) * segment_sum(x0, i, 0, 3))"},
        lambda x0, i, k: torch.where(
            x0 > 0,
            x0,
            torch.log(-torch.where(x0 > 0, -1, x0)) * x0.new_zeros(3).index_add(0, i, x0),
        ),
    ),
    # A number beside a gather became a tensor in the index's int64: 1 + k**2 was 1
    # (seed 500904).
    "a number beside a gather": (
        {"y": "atan2(gather(x0, 0, i), 1 + k**2)"},
        lambda x0, i, k: torch.atan2(x0.gather(0, i), torch.tensor(1 + k**2, dtype=x0.dtype)),
    ),
    # The same at a computed index: the argmin's temporary, int64 too (seed 61).
    "a number beside a gather at an argmin": (
        {"y": "min(gather(log(1 + x0**2), 0, argmin(x0, 0, keepdim=True)), k)"},
        lambda x0, i, k: torch.minimum(
            torch.log(1 + x0**2).gather(0, x0.argmin(0, keepdim=True)),
            torch.tensor(k, dtype=x0.dtype),
        ),
    ),
    # Terms that cancel beside an index condition: their zeros took the shape and the
    # int64 dtype of the index (seed 927 of the final fuzz run).
    "terms that cancel beside an index condition": (
        {"y": "where(i != 0, sin(x0), x0) - where(i != 0, sin(x0), x0)"},
        lambda x0, i, k: 0 * torch.where(i != 0, torch.sin(x0), x0),
    ),
}


@pytest.mark.parametrize("name", INDEX_CASES)
def test_index_findings_match_autograd(name: str) -> None:
    outputs, formula = INDEX_CASES[name]
    function = _index_finding(outputs)
    x0 = torch.tensor([0.7, -0.4, -1.3], dtype=torch.float64, requires_grad=True)
    i = torch.tensor([1, 0, 1])
    mine, want = function(x0, i, K), formula(x0, i, K)
    torch.testing.assert_close(mine, want, rtol=1e-12, atol=1e-12)
    cotangent = torch.linspace(-1, 1, want.numel(), dtype=torch.float64).reshape(want.shape)
    (got,) = torch.autograd.grad(mine, x0, cotangent)
    (expected,) = torch.autograd.grad(want, x0, cotangent)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


# torch.func's own deprecation warning on this torch release, not the Function's.
@pytest.mark.filterwarnings("ignore:`torch.jit.script.*is deprecated:DeprecationWarning")
def test_an_input_returned_through_a_cancelled_broadcast_is_a_view_of_it() -> None:
    """`x0 - e + e` cancels to a broadcast of x0 that prints as x0: returned as-is (not a
    view) beside x0 saved for backward, forward AD refused it (fuzzer seed 29260)."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Finding",
            "inputs": {"x0": {"type": "tensor", "shape": []}},
            "outputs": {
                "y0": "relu(einsum(',->', x0, x0)) + sin(x0)",
                "y2": {
                    "expr": "x0 - einsum('->', where(x0 > -0.28, x0, x0)) "
                    "+ einsum('->', where(x0 > -0.28, x0, x0))",
                    "differentiable": False,
                },
            },
        }
    )
    function = getattr(symgrad.load_module(spec), spec.module)
    x0 = torch.tensor(0.3, dtype=torch.float64)
    _, tangent = torch.func.jvp(lambda x: function(x)[0], (x0,), (torch.ones_like(x0),))
    torch.testing.assert_close(tangent, 2 * x0 + torch.cos(x0))
