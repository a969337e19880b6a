"""Cheaper identities (symgrad.ad.cheapen): what is rewritten, what must not be, and that
each rewrite computes the same values, also where the written form loses precision."""

from __future__ import annotations

import inspect

import pytest
import sympy
import torch

import symgrad
from symgrad.ad import cheapen
from symgrad.language import piecewise

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


_x, _a, _b, _k = sympy.symbols("x a b k", real=True)
_c = _x > 0
_OTHER = _x < 1
# (a where, the same where with its routing wheres dropped, or None when it must stay)
NESTED = [
    ("taken", piecewise.where(_c, piecewise.where(_c, _a, 0) * _k, _b), (_a * _k, _b)),
    ("untaken", piecewise.where(_c, _a, piecewise.where(_c, 0, _b) * _k), (_a, _b * _k)),
    ("in a sum", piecewise.where(_c, piecewise.where(_c, _a, 0) + _k, _b), (_a + _k, _b)),
    # A guard evaluates the branch at a safe point where it is not taken: it stays.
    ("guard", piecewise.where(_c, _a / piecewise.where(_c, _x, 1), _b), None),
    ("other condition", piecewise.where(_c, piecewise.where(_OTHER, _a, 0) * _k, _b), None),
    # Inside a function the positions are still the condition's, but the zero is read.
    ("under exp", piecewise.where(_c, sympy.exp(piecewise.where(_c, _a, 0)), _b), None),
]


@pytest.mark.parametrize(("case", "expr", "branches"), NESTED, ids=[n[0] for n in NESTED])
def test_merge_branches_drops_a_where_nested_under_its_own_condition(
    case: str, expr: sympy.Expr, branches: tuple[sympy.Expr, sympy.Expr] | None
) -> None:
    merged = cheapen.merge_branches(expr)
    expected = expr if branches is None else piecewise.where(_c, *branches)
    assert merged == expected


def test_a_branch_divided_by_a_number_has_one_guard() -> None:
    """where(x > 0, x / s, x): the backward is one where of the branches' slopes, whose
    divisor is guarded once; at s = 0, double backward stays finite where x <= 0."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Scaled",
            "inputs": {"x": "tensor", "s": "float"},
            "outputs": {"y": "where(x > 0, x / s, x)"},
        }
    )
    module = symgrad.load_module(spec)
    source = inspect.getsource(module.Scaled.backward)
    assert source.count("torch.where(") == 2
    x = torch.linspace(-2, 2, 8, dtype=torch.float64, requires_grad=True)  # not 0: a kink
    assert torch.autograd.gradcheck(lambda t: module.scaled(t, 0.5), (x,))
    assert torch.autograd.gradgradcheck(lambda t: module.scaled(t, 0.5), (x,))
    y = module.scaled(x, 0.0)
    grad_out = torch.ones_like(y, requires_grad=True)
    (grad_x,) = torch.autograd.grad(y, x, grad_out, create_graph=True)
    (second,) = torch.autograd.grad(grad_x.sum(), grad_out)
    untaken = x.detach() <= 0
    assert torch.equal(second[untaken], torch.ones_like(second[untaken]))
