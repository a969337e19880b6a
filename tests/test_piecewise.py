"""Conditionals: torch's conventions at kinks and ties, and no NaN from untaken branches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sympy
import torch

import symgrad
from symgrad.ad import guards
from symgrad.language import piecewise
from tests.conftest import import_file

# Points on both sides of every kink below, and exactly on them.
POINTS = torch.tensor([-3.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0], dtype=torch.float64)


def _function(tmp_path: Path, expr: str, inputs: dict[str, object] | None = None) -> Callable:
    """Generate a one-output Function for `expr` and return its convenience function."""
    name = f"Case{abs(hash(expr)) % 10**8}"
    spec = symgrad.spec_from_dict(
        {"name": name, "inputs": inputs or {"x": "tensor"}, "outputs": {"y": expr}}
    )
    files = symgrad.generate(spec)
    symgrad.write_files(files, tmp_path)
    module = import_file(tmp_path / f"{spec.module}.py", spec.module)
    return getattr(module, spec.module)


def _grad(fn: Callable, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
    leaves = [a.clone().requires_grad_() for a in args]
    return torch.autograd.grad(fn(*leaves).sum(), leaves)


@pytest.mark.parametrize(
    ("expr", "builtin"),
    [
        ("relu(x)", torch.relu),
        ("abs(x)", torch.abs),
        ("clamp(x, -1, 1)", lambda x: torch.clamp(x, -1, 1)),
        # A number bound splits a tie like torch.maximum with a tensor of that number.
        ("max(x, 0.5)", lambda x: torch.maximum(x, torch.full_like(x, 0.5))),
        ("min(x, -0.5)", lambda x: torch.minimum(x, torch.full_like(x, -0.5))),
    ],
)
def test_kinks_follow_torch_everywhere_boundaries_included(
    tmp_path: Path, expr: str, builtin: Callable
) -> None:
    fn = _function(tmp_path, expr)
    torch.testing.assert_close(fn(POINTS), builtin(POINTS), rtol=0, atol=0)
    torch.testing.assert_close(_grad(fn, POINTS), _grad(builtin, POINTS), rtol=0, atol=0)


def test_max_and_min_of_two_tensors_split_ties_like_torch(tmp_path: Path) -> None:
    other = torch.tensor([-3.0, 0.0, -1.0, 1.0, 0.0, 0.5, 2.0, 1.5, -3.0], dtype=torch.float64)
    for expr, builtin in (("max(x, w)", torch.maximum), ("min(x, w)", torch.minimum)):
        fn = _function(tmp_path, expr, {"x": "tensor", "w": "tensor"})
        torch.testing.assert_close(fn(POINTS, other), builtin(POINTS, other), rtol=0, atol=0)
        for got, want in zip(_grad(fn, POINTS, other), _grad(builtin, POINTS, other), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_clamp_with_tensor_bounds_matches_torch(tmp_path: Path) -> None:
    low = torch.full_like(POINTS, -1.0)
    high = torch.full_like(POINTS, 1.0)
    fn = _function(tmp_path, "clamp(x, lo, hi)", {"x": "tensor", "lo": "tensor", "hi": "tensor"})
    for got, want in zip(
        _grad(fn, POINTS, low, high), _grad(torch.clamp, POINTS, low, high), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (
            "where(x > 0, sqrt(x), 0)",
            lambda x: torch.where(x > 0, 0.5 / x.clamp(min=1e-300).sqrt(), 0),
        ),
        ("where(x != 0, sin(x) / x, 1)", None),
        ("where(x > -1, log(1 + x), -x)", lambda x: torch.where(x > -1, 1 / (1 + x).abs(), -1)),
    ],
)
def test_untaken_branches_give_no_nan(tmp_path: Path, expr: str, expected: Callable | None) -> None:
    fn = _function(tmp_path, expr)
    (grad,) = _grad(fn, POINTS)
    assert torch.isfinite(grad).all(), grad
    if expected is not None:
        torch.testing.assert_close(grad, expected(POINTS))
    # Second order too: the backward's own where() must not multiply NaN by zero.
    x = POINTS.clone().requires_grad_()
    (first,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x)
    assert torch.isfinite(second).all(), second


def test_sinc_gradient_at_zero_is_the_limit(tmp_path: Path) -> None:
    fn = _function(tmp_path, "where(x != 0, sin(x) / x, 1)")
    (grad,) = _grad(fn, torch.tensor([0.0, 1e-3], dtype=torch.float64))
    assert grad[0] == 0
    torch.testing.assert_close(
        grad[1], torch.tensor(-1e-3 / 3, dtype=torch.float64), rtol=1e-3, atol=0
    )


def test_number_branches_take_the_tensor_dtype(tmp_path: Path) -> None:
    fn = _function(tmp_path, "x * where(x > 0, 2, 1)")
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        value = fn(POINTS.to(dtype))
        assert value.dtype == dtype
        torch.testing.assert_close(value, (POINTS * torch.where(POINTS > 0, 2.0, 1.0)).to(dtype))


def test_conditions_on_numbers_use_python(tmp_path: Path) -> None:
    fn = _function(
        tmp_path, "where(k > 0 and not k > 10, k * x, -x)", {"x": "tensor", "k": "float"}
    )
    torch.testing.assert_close(fn(POINTS, 2.0), 2 * POINTS)
    torch.testing.assert_close(fn(POINTS, -2.0), -POINTS)
    torch.testing.assert_close(fn(POINTS, 20.0), -POINTS)


def test_chained_and_combined_conditions(tmp_path: Path) -> None:
    fn = _function(tmp_path, "where(-1 < x <= 1 or x > 2.5, x**2, 0)")
    mask = ((POINTS > -1) & (POINTS <= 1)) | (POINTS > 2.5)
    torch.testing.assert_close(fn(POINTS), torch.where(mask, POINTS**2, 0.0))
    (grad,) = _grad(fn, POINTS)
    torch.testing.assert_close(grad, torch.where(mask, 2 * POINTS, 0.0))


def test_guard_leaves_everywhere_finite_branches_alone() -> None:
    x = sympy.Symbol("x", real=True)
    polynomial = piecewise.where(x > 0, x**2 + 3 * x, sympy.Integer(0))
    assert guards.guard_branches(polynomial, {x}) == polynomial
    rooted = guards.guard_branches(piecewise.where(x > 0, sympy.sqrt(x), sympy.Integer(0)), {x})
    assert rooted.args[1] == sympy.sqrt(piecewise.where(x > 0, x, 1))


def test_guard_finds_points_relative_to_other_inputs() -> None:
    x, lo = sympy.symbols("x lo", real=True)
    guarded = guards.guard_branches(
        piecewise.where(x > lo, sympy.log(x - lo), sympy.Integer(0)), {x}
    )
    assert guarded.args[1] == sympy.log(piecewise.where(x > lo, x, lo + 1) - lo)


def test_number_branches_borrow_a_numeric_tensor_not_a_boolean_temporary(
    tmp_path: Path,
) -> None:
    # Found by the grammar fuzz: `x > 1` becomes a boolean temporary shared by both
    # where()s, and the number branches once took its (bool) dtype.
    fn = _function(
        tmp_path,
        "where((x < where(x > 1, x, w)) or (x > 1), c, 0.5)",
        {"x": "tensor", "w": "tensor", "c": {"type": "float", "default": 0.7}},
    )
    w = torch.zeros_like(POINTS)
    mask = (torch.where(POINTS > 1, POINTS, w) > POINTS) | (POINTS > 1)
    want = torch.where(mask, 0.7, 0.5).to(torch.float64)
    torch.testing.assert_close(fn(POINTS, w), want)


def test_a_number_condition_with_one_tensor_branch_gives_a_tensor(tmp_path: Path) -> None:
    # Found by the grammar fuzz: where(c > 0.5, c, x) returned the float c into atan2.
    fn = _function(
        tmp_path,
        "atan2(where(c > 0.5, c, x), 1 + x**2)",
        {"x": "tensor", "c": {"type": "float", "default": 0.7}},
    )
    torch.testing.assert_close(fn(POINTS), torch.atan2(torch.full_like(POINTS, 0.7), 1 + POINTS**2))
    torch.testing.assert_close(fn(POINTS, 0.2), torch.atan2(POINTS, 1 + POINTS**2))


def test_a_constant_gradient_branch_is_expanded_to_the_input(tmp_path: Path) -> None:
    # Found by the grammar fuzz: the gradient of w here is a 0-d zero when c > 0.5.
    fn = _function(
        tmp_path,
        "x * where(c > 0.5, 1, w)",
        {"x": "tensor", "w": "tensor", "c": {"type": "float", "default": 0.7}},
    )
    w = torch.ones_like(POINTS)
    for c, want in ((0.7, torch.zeros_like(POINTS)), (0.2, POINTS)):
        (grad,) = _grad(lambda weight, c=c: fn(POINTS, weight, c), w)
        torch.testing.assert_close(grad, want)
