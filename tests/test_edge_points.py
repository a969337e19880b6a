"""Edge points follow torch's conventions (issue 11, item 3).

Each case generates a Function from a one-line spec and compares its values and
gradients, at the edge points, with torch autograd run through the plain torch formula:
NaN where torch has NaN, inf where torch has inf, and the same dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import torch

from symgrad.api import load_module, spec_from_dict

NAN = math.nan


def generated(expr: str, inputs: Mapping[str, Any]) -> Any:
    """The `apply` of the Function with the one output `y: expr`."""
    spec = spec_from_dict({"name": "Edge", "inputs": dict(inputs), "outputs": {"y": expr}})
    return load_module(spec).Edge.apply


def values_and_gradients(
    function: Callable[..., torch.Tensor], arguments: list[Any]
) -> list[torch.Tensor]:
    """The output and the gradient of its sum in each tensor argument."""
    arguments = [
        a.detach().requires_grad_() if isinstance(a, torch.Tensor) else a for a in arguments
    ]
    tensors = [a for a in arguments if isinstance(a, torch.Tensor)]
    output = function(*arguments)
    gradients = torch.autograd.grad(output.sum(), tensors, allow_unused=True)
    return [
        output.detach(),
        *(torch.zeros_like(t) if g is None else g for g, t in zip(gradients, tensors, strict=True)),
    ]


def assert_matches_torch(
    expr: str,
    inputs: Mapping[str, Any],
    arguments: list[Any],
    reference: Callable[..., torch.Tensor],
    dtype: torch.dtype = torch.float64,
) -> None:
    arguments = [
        torch.tensor(a, dtype=dtype) if inputs[name] == "tensor" else a
        for name, a in zip(inputs, arguments, strict=True)
    ]
    actual = values_and_gradients(generated(expr, inputs), arguments)
    expected = values_and_gradients(reference, arguments)
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        what = "value" if index == 0 else f"gradient {index}"
        assert got.dtype == want.dtype, f"{what}: {got.dtype} != {want.dtype}"
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m, w=what: f"{w}: {m}")


TENSOR = {"x": "tensor"}
TWO_TENSORS = {"x": "tensor", "z": "tensor"}


@pytest.mark.parametrize(
    ("expr", "reference"),
    [
        ("x**2", lambda x: x**2),
        ("x**3", lambda x: x**3),
        ("x**1.5", lambda x: x**1.5),
        ("x**0.5 + x**-1", lambda x: x**0.5 + x**-1),
    ],
)
def test_power_of_a_constant_at_zero(expr: str, reference: Callable[..., torch.Tensor]) -> None:
    assert_matches_torch(expr, TENSOR, [[0.0, -0.0, 2.0]], reference)


@pytest.mark.parametrize("n", [0, 1, 2, 3], ids=repr)
@pytest.mark.parametrize("kind", ["int", "float"])
def test_power_with_a_number_input_exponent_at_zero(n: int, kind: str) -> None:
    """d x**n / dx is 0 at x = 0 for n >= 1, and 0 everywhere for n = 0 (torch)."""
    exponent = n if kind == "int" else float(n)
    inputs = {"x": "tensor", "n": kind}
    assert_matches_torch("x**n", inputs, [[0.0, 2.0, NAN], exponent], lambda x, n: x**n)


def test_power_with_a_tensor_exponent_at_zero() -> None:
    """d/dx is 0 where the exponent is 0, d/dz is 0 where x == 0 and z >= 0 (torch)."""
    xs = [0.0, 0.0, 0.0, 0.0, 1.0, -2.0, 2.0, NAN]
    zs = [2.0, 0.0, 0.5, -1.0, 0.0, 2.0, -0.5, 0.0]
    assert_matches_torch("x**z", TWO_TENSORS, [xs, zs], lambda x, z: x**z)


@pytest.mark.parametrize("c", [-1.5, 0.0, 2.0, NAN], ids=repr)
def test_number_to_a_tensor_power(c: float) -> None:
    """log(c) of a negative number input is nan, not a Python math domain error."""
    inputs = {"x": "tensor", "c": "float"}
    assert_matches_torch("c**x", inputs, [[2.0, -1.0, 0.0], c], lambda x, c: c**x)


def test_division_by_a_zero_int_input() -> None:
    """0.5 / beta with beta = 0 is inf, as torch divides, not ZeroDivisionError."""
    inputs = {"x": "tensor", "beta": "int"}
    assert_matches_torch(
        "0.5 * x ** 2 / beta", inputs, [[2.0, 0.0, -1.0], 0], lambda x, b: 0.5 * x**2 / b
    )


@pytest.mark.parametrize(
    ("expr", "reference", "value"),
    [
        ("x * log(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).log(), -1.0),
        ("x * log(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).log(), 0.0),
        ("x * sqrt(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).sqrt(), -1.0),
        ("x * exp(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).exp(), 1000.0),
        ("x * acos(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).acos(), 2.0),
        ("x * atanh(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).atanh(), 1.0),
        ("x * lgamma(c)", lambda x, c: x * torch.tensor(c, dtype=torch.float64).lgamma(), -2.0),
        ("x / (c - 1)", lambda x, c: x / (c - 1), 1.0),
    ],
)
def test_number_arithmetic_outside_the_domain(
    expr: str, reference: Callable[..., torch.Tensor], value: float
) -> None:
    """Python's math raises where torch gives nan or inf; the generated code gives torch's."""
    inputs = {"x": "tensor", "c": "float"}
    assert_matches_torch(expr, inputs, [[2.0, 0.0, -1.0], value], reference)


def test_atan2_at_the_origin() -> None:
    xs = [0.0, -0.0, 1.0, 0.0]
    zs = [0.0, 0.0, 2.0, -1.0]
    assert_matches_torch("atan2(x, z)", TWO_TENSORS, [xs, zs], torch.atan2)


def test_atan2_double_backward_is_finite_at_the_origin() -> None:
    x = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    z = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    y = generated("atan2(x, z)", TWO_TENSORS)(x, z)
    (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    assert torch.isfinite(torch.autograd.grad(gx.sum(), [x, z])[0]).all()


@pytest.mark.parametrize(
    ("xs", "zs"),
    [([1e-30, 1.0, 3.0], [1e-30, 1e-30, 1e30]), ([1e-20, 5e-20, -1.0], [1e-25, -1e-22, 2.0])],
    ids=repr,
)
def test_division_gradient_in_float32(xs: list[float], zs: list[float]) -> None:
    """d(x / z)/dz = -(g / z) * (x / z): no z**2 to under- or overflow (z = 1e-30)."""
    assert_matches_torch("x / z", TWO_TENSORS, [xs, zs], torch.div, dtype=torch.float32)


@pytest.mark.parametrize(
    ("expr", "reference"),
    [
        ("xlogy(x, z)", torch.special.xlogy),
        ("xlog1py(x, z)", torch.special.xlog1py),
    ],
)
def test_xlogy_at_nan(expr: str, reference: Callable[..., torch.Tensor]) -> None:
    """At x = nan, d/dx is log(y) (torch's mask is x == 0 and y <= pole)."""
    xs = [NAN, NAN, 0.0, 0.0, 0.0, 1.0]
    zs = [2.0, 0.5, NAN, 0.5, -1.0, NAN]
    assert_matches_torch(expr, TWO_TENSORS, [xs, zs], reference)


@pytest.mark.parametrize(
    ("expr", "reference"),
    [
        ("max(x, 0.5)", lambda x: torch.maximum(x, torch.tensor(0.5))),
        ("min(x, 0.5) * 2.0", lambda x: torch.minimum(x, torch.tensor(0.5)) * 2.0),
        ("atan2(x, 2.0)", lambda x: torch.atan2(x, torch.tensor(2.0))),
        ("hypot(x, 2.0)", lambda x: torch.hypot(x, torch.tensor(2.0))),
        ("x * 2.0 + pi", lambda x: x * 2.0 + math.pi),
        ("exp(x) / 3", lambda x: torch.exp(x) / 3),
    ],
)
def test_a_zero_dim_float32_tensor_stays_float32(
    expr: str, reference: Callable[..., torch.Tensor]
) -> None:
    """A number beside a 0-d tensor must not promote it (a 0-d float64 tensor would)."""
    assert_matches_torch(expr, TENSOR, [0.7], reference, dtype=torch.float32)


# --- Kinked functions: their rules live in symgrad/language/piecewise.py --------------------------
#
# Expected to pass once the expansions of Relu, Maximum, Minimum and Clamp follow torch's
# masks (see the report of issue 11, item 3); until then they fail as xfail.


def test_relu_at_nan() -> None:
    """torch.relu's gradient is 0 where relu(x) <= 0, so 1 at nan."""
    assert_matches_torch("relu(x)", TENSOR, [[NAN, 0.0, -1.0, 2.0]], torch.relu)


@pytest.mark.parametrize(
    ("expr", "reference"), [("max(x, z)", torch.maximum), ("min(x, z)", torch.minimum)]
)
def test_extremum_at_nan(expr: str, reference: Callable[..., torch.Tensor]) -> None:
    """torch gives the whole gradient to both sides where either is nan (no comparison holds)."""
    xs = [NAN, 1.0, NAN, 1.0, 2.0]
    zs = [1.0, NAN, NAN, 1.0, -2.0]
    assert_matches_torch(expr, TWO_TENSORS, [xs, zs], reference)


def test_clamp_with_crossed_tensor_bounds_and_nan() -> None:
    """x gets the gradient where lo <= x <= hi; lo where x < lo < hi; hi where x > hi or
    hi < lo (so hi, not lo, where the bounds cross); nothing at a nan."""
    inputs = {"x": "tensor", "lo": "tensor", "hi": "tensor"}
    xs = [0.5, -0.5, 1.5, NAN, 0.5, 0.5, 0.0, 1.0]
    los = [1.0, 1.0, 1.0, 0.0, NAN, 0.0, 1.0, 1.0]
    his = [0.0, 0.0, 0.0, 1.0, 1.0, NAN, 1.0, 1.0]
    assert_matches_torch("clamp(x, lo, hi)", inputs, [xs, los, his], torch.clamp)


def test_clamp_with_number_bounds_at_nan() -> None:
    inputs = {"x": "tensor"}
    assert_matches_torch(
        "clamp(x, -1, 1)", inputs, [[NAN, 0.5, -1.0, 1.0, 2.0]], lambda x: torch.clamp(x, -1, 1)
    )


def test_mean_over_the_last_dim_of_a_zero_dim_tensor() -> None:
    assert_matches_torch("mean(x, dim=-1)", TENSOR, [1.5], lambda x: torch.mean(x, dim=-1))
