"""`where` against torch autograd of the same formula written by hand (issue 11).

Each case generates a Function from a spec and compares its values and gradients with
torch.autograd applied to the plain formula, at points chosen to trip the conditional:
NaN inputs, integer conditions, conditions decided without tensors, removable
singularities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from symgrad import api

NAN = float("nan")


def _function(expr: str, inputs: dict[str, Any], where: dict[str, str] | None = None) -> Any:
    """The generated convenience function of a one-output spec."""
    data: dict[str, Any] = {"name": "WhereCase", "inputs": inputs, "outputs": {"y": expr}}
    if where:
        data["where"] = where
    module = api.load_module(api.spec_from_dict(data))
    return module.where_case


def _value_and_grads(
    fn: Callable[..., torch.Tensor], args: Sequence[Any]
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """fn(*args) and the gradients of its sum with respect to the float tensors."""
    leaves = [
        (
            a.detach().clone().requires_grad_()
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
        )
        for a in args
    ]
    value = fn(*leaves)
    wanted = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = torch.autograd.grad(value.sum(), wanted, allow_unused=True) if wanted else ()
    # A gradient that is zero by construction (floor, ceil) may come back as None.
    return value.detach(), [
        torch.zeros_like(w) if g is None else g for w, g in zip(wanted, grads, strict=True)
    ]


def _check(
    generated: Callable[..., torch.Tensor], plain: Callable[..., torch.Tensor], *args: Any
) -> None:
    got_value, got_grads = _value_and_grads(generated, args)
    want_value, want_grads = _value_and_grads(plain, args)
    assert got_value.dtype == want_value.dtype
    assert got_value.shape == want_value.shape
    assert got_value.device == want_value.device
    torch.testing.assert_close(got_value, want_value, equal_nan=True, rtol=1e-12, atol=0)
    for got, want in zip(got_grads, want_grads, strict=True):
        want = torch.zeros_like(got) if want is None else want
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-12, atol=0)


POINTS = torch.tensor([NAN, -2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)


# --- item 4: conditions on tensors are never folded --------------------------------------


@pytest.mark.parametrize(
    ("expr", "plain"),
    [
        ("where(x != x, 0.0, x)", lambda x: torch.where(x != x, 0.0, x)),
        ("where(x == x, x**2, -1.0)", lambda x: torch.where(x == x, x**2, -1.0)),
        ("where(x >= x, 3 * x, 0.5)", lambda x: torch.where(x >= x, 3 * x, 0.5)),
        ("where(x**2 >= 0, x, -1.0)", lambda x: torch.where(x**2 >= 0, x, -1.0)),
        ("where(exp(x) > 0, x, 7.0)", lambda x: torch.where(torch.exp(x) > 0, x, 7.0)),
        ("where(not x > 0, x, 2 * x)", lambda x: torch.where(~(x > 0), x, 2 * x)),
        ("where(x > 0 or x <= 0, x, 2 * x)", lambda x: torch.where((x > 0) | (x <= 0), x, 2 * x)),
    ],
)
def test_nan_tests_on_tensors_are_kept(expr: str, plain: Callable[..., torch.Tensor]) -> None:
    _check(_function(expr, {"x": "tensor"}), plain, POINTS)


def test_nan_comparison_in_a_condition_does_not_crash_generation() -> None:
    # The search for a safe point once compared 0/0 with 0: "Invalid NaN comparison".
    a = torch.tensor([-3.0, -1.0, 1.0, 3.0, 5.0], dtype=torch.float64)
    b = torch.tensor([2.0, -4.0, 4.0, -2.0, 0.5], dtype=torch.float64)
    fn = _function("where(a / b >= 0, floor(a / b), ceil(a / b))", {"a": "tensor", "b": "tensor"})
    _check(fn, lambda a, b: torch.where(a / b >= 0, torch.floor(a / b), torch.ceil(a / b)), a, b)


# --- item 5: number branches under an integer condition -----------------------------------


def test_number_branches_take_the_promoted_dtype_not_the_conditions() -> None:
    fn = _function(
        "where(c != 0, 8.5, 2) * x",
        {"x": "tensor", "c": {"type": "tensor", "requires_grad": False}},
    )
    c = torch.tensor([0, 1, -3, 0, 2])
    _check(fn, lambda x, c: torch.where(c != 0, 8.5, 2) * x, POINTS[1:], c)
    alone = _function("where(c != 0, 8.5, 2)", {"c": {"type": "tensor", "requires_grad": False}})
    assert alone(c).tolist() == [2.0, 8.5, 8.5, 2.0, 8.5]
    assert alone(c).dtype == torch.where(c != 0, 8.5, 2).dtype
    assert alone(c.double()).dtype == torch.float64


# --- item 3: conditions decided without tensors --------------------------------------------

X32 = torch.linspace(-1.0, 1.0, 6, dtype=torch.float32).reshape(3, 2)


@pytest.mark.parametrize("t", [-0.5, 0.5])
def test_number_condition_keeps_shape_dtype_and_device(t: float) -> None:
    fn = _function("where(t > 0, x, 0.75)", {"x": "tensor", "t": "float"})
    cond = torch.tensor(t > 0)
    _check(fn, lambda x, t: torch.where(cond, x, 0.75), X32, t)
    both = _function("where(t > 0, x, w)", {"x": "tensor", "w": "tensor", "t": "float"})
    w = torch.tensor([2.0, -2.0], dtype=torch.float64)
    _check(both, lambda x, w, t: torch.where(cond, x, w), X32, w, t)


def test_decided_comparison_keeps_the_broadcast_shape() -> None:
    fn = _function("where(2 > 1, x, w)", {"x": "tensor", "w": "tensor"})
    w = torch.tensor([2.0, -2.0], dtype=torch.float64)
    _check(fn, lambda x, w: torch.where(torch.tensor(True), x, w), X32[:, :1], w)


# --- item 4: untaken branches leak no NaN, whatever the condition's form -----------------


def _select(
    mask: Callable[..., torch.Tensor],
    taken: Callable[..., torch.Tensor],
    untaken: Callable[..., torch.Tensor],
) -> Callable[..., torch.Tensor]:
    """The plain formula, each branch differentiated by torch on its own side only."""

    class Select(torch.autograd.Function):
        @staticmethod
        def forward(*args: Any) -> torch.Tensor:
            return torch.where(mask(*args), taken(*args), untaken(*args))

        @staticmethod
        def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
            ctx.inputs = inputs

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> Any:
            args = ctx.inputs
            m = mask(*args)
            tensors = [
                i
                for i, a in enumerate(args)
                if isinstance(a, torch.Tensor) and a.is_floating_point()
            ]
            result: list[Any] = [None] * len(args)
            for branch, side in ((taken, m), (untaken, ~m)):
                leaves = list(args)
                for i in tensors:
                    leaves[i] = args[i].detach().requires_grad_()
                with torch.enable_grad():
                    value = branch(*leaves)
                    grads = torch.autograd.grad(
                        value,
                        [leaves[i] for i in tensors],
                        torch.ones_like(value),
                        allow_unused=True,
                    )
                for i, g in zip(tensors, grads, strict=True):
                    g = torch.zeros_like(args[i]) if g is None else g
                    part = torch.where(side, grad * g, 0).sum_to_size(args[i].shape)
                    result[i] = part if result[i] is None else result[i] + part
            return tuple(result)

    return Select.apply


def _barron_general(x: Any, alpha: Any) -> Any:
    d = abs(alpha - 2)
    return d / alpha * ((x**2 / d + 1) ** (alpha / 2) - 1)


GENERAL = "abs(alpha - 2) / alpha * ((x**2 / abs(alpha - 2) + 1)**(alpha / 2) - 1)"
XS = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64)
ALPHAS = torch.tensor([2.0, 2.0, 1.0, 2.0, 4.0], dtype=torch.float64)


@pytest.mark.parametrize(
    ("expr", "inputs", "where", "mask"),
    [
        (
            f"where(abs(alpha - 2) < 1e-3, x**2 / 2, {GENERAL})",
            {"x": "tensor", "alpha": "tensor"},
            None,
            lambda x, alpha: abs(alpha - 2) < 1e-3,
        ),
        (
            f"where(abs(alpha - 2) < eps, x**2 / 2, {GENERAL})",
            {"x": "tensor", "alpha": "tensor", "eps": {"type": "float", "default": 1e-3}},
            None,
            lambda x, alpha, eps=1e-3: abs(alpha - 2) < eps,
        ),
        (
            f"where(abs(alpha - 2) < eps, x**2 / 2, {GENERAL})",
            {"x": "tensor", "alpha": "tensor", "eps": "tensor"},
            None,
            lambda x, alpha, eps: abs(alpha - 2) < eps,
        ),
        (
            f"where(not (alpha > 2 + 1e-3 or alpha < 2 - 1e-3), x**2 / 2, {GENERAL})",
            {"x": "tensor", "alpha": "tensor"},
            None,
            lambda x, alpha: ~((alpha > 2 + 1e-3) | (alpha < 2 - 1e-3)),
        ),
        (
            f"where(d < 1e-3, x**2 / 2, {GENERAL})",
            {"x": "tensor", "alpha": "tensor"},
            {"d": "abs(alpha - 2)"},
            lambda x, alpha: abs(alpha - 2) < 1e-3,
        ),
    ],
)
def test_removable_singularity_leaks_no_nan(
    expr: str, inputs: dict[str, Any], where: dict[str, str] | None, mask: Callable[..., Any]
) -> None:
    fn = _function(expr, inputs, where)
    args: list[Any] = [XS, ALPHAS]
    if "eps" in inputs and inputs["eps"] == "tensor":
        args.append(torch.full_like(XS, 1e-3))
    plain = _select(
        mask, lambda x, alpha, *rest: x**2 / 2, lambda x, alpha, *rest: _barron_general(x, alpha)
    )
    _check(fn, plain, *args)
    value, grads = _value_and_grads(fn, args)
    assert all(bool(torch.isfinite(g).all()) for g in [value, *grads] if g is not None)


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_removable_singularity_on_a_number_input(alpha: float) -> None:
    fn = _function(
        f"where(abs(alpha - 2) < 1e-3, x**2 / 2, {GENERAL})", {"x": "tensor", "alpha": "float"}
    )
    cond = torch.tensor(abs(alpha - 2) < 1e-3)
    plain = _select(lambda x, a: cond, lambda x, a: x**2 / 2, lambda x, a: _barron_general(x, a))
    _check(fn, plain, XS, alpha)
