"""Cheaper identities (symgrad.ad.cheapen): what is rewritten, what must not be, and that
each rewrite computes the same values, also where the written form loses precision."""

from __future__ import annotations

import pytest
import sympy
import torch

import symgrad
from symgrad.ad import cheapen

# (formula, the rewritten formula, or None when it must stay)
CASES = [
    ("1 + tanh(x)", "2 * sigmoid(2 * x)"),
    ("0.5 - 0.5 * tanh(x - 2)", "sigmoid(4 - 2 * x)"),
    ("0.5 * (1 - tanh(x))", "sigmoid(-2 * x)"),
    ("3 + 3 * tanh(x * y) + y", "6 * sigmoid(2 * x * y) + y"),
    ("1 + 2 * tanh(x)", None),
    ("y + tanh(x)", None),
    ("tanh(x)", None),
]


def _expr(formula: str) -> sympy.Expr:
    spec = symgrad.spec_from_dict(
        {"name": "Case", "inputs": {"x": "tensor", "y": "tensor"}, "outputs": {"z": formula}}
    )
    return spec.outputs[0].expr


@pytest.mark.parametrize(("formula", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rewrites_exactly_the_shifted_tanh(formula: str, expected: str | None) -> None:
    written = _expr(formula)
    assert cheapen.cheapen(written) == (written if expected is None else _expr(expected))


SHIFTED = {"0.5 * (1 - tanh(x))": (0.5, -1), "1 + tanh(x)": (1.0, 1), "2 - 2 * tanh(x)": (2.0, -1)}


@pytest.mark.parametrize("formula", SHIFTED)
def test_the_rewrite_keeps_float32_accuracy_and_the_tail(formula: str) -> None:
    """Up to |x| = 100: a few ulps everywhere, and the tail that 1 - tanh rounds to 0."""
    spec = symgrad.spec_from_dict(
        {"name": "Case", "inputs": {"x": "tensor"}, "outputs": {"z": formula}}
    )
    module = symgrad.load_module(spec)
    assert "tanh" not in module.__dict__["Case"].forward.__code__.co_names
    scale, sign = SHIFTED[formula]
    x = torch.linspace(-100, 100, 2001, dtype=torch.float32, requires_grad=True)
    value = module.case(x)
    (gradient,) = torch.autograd.grad(value.sum(), x)
    # The exact values, from k (1 + tanh(u)) = 2k sigmoid(2u), in float64.
    u = sign * 2 * x.detach().double()
    exact_value = 2 * scale * torch.sigmoid(u)
    exact_gradient = 4 * scale * sign * torch.sigmoid(u) * torch.sigmoid(-u)
    ulp = scale * 2.0**-23
    assert torch.all((value.detach().double() - exact_value).abs() <= 2 * ulp)
    assert torch.all((gradient.double() - exact_gradient).abs() <= 4 * ulp)
    tail = (exact_value < 1e-10) & (exact_value > 1e-35)
    torch.testing.assert_close(value.detach().double()[tail], exact_value[tail], rtol=1e-5, atol=0)
    assert torch.all(scale * (1 + sign * torch.tanh(x.detach()))[tail] == 0)  # as written
