"""Exact at the edges: float32 at +-30, +-10, tiny values and 0 (issue 28).

Each row generates a Function from a one-output spec and runs it in float32 at the
points listed. Its value and gradients must be finite wherever torch's float32 built-in
is, and within max(4 x torch's own float32 error, 1e-6 x the condition scale) of the
float64 value of the built-in; the condition scale of a value f(x) is
|f| + sum |df/dx_i * x_i|, and that of a gradient g is |g| (its own condition is not
known without second derivatives).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import sympy
import torch

from symgrad.api import generate, load_module, spec_from_dict
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.python.printer import TorchPrinter
from symgrad.language.piecewise import Gt, Minimum, where
from tests.extreme_subjects import over_exact

Reference = Callable[..., torch.Tensor]


def _row(
    expr: str, reference: Reference, points: list[float], inputs: Mapping[str, str] | None = None
) -> tuple[str, Reference, list[float], Mapping[str, str]]:
    return expr, reference, points, inputs or {"x": "tensor"}


def _celu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.celu(x, alpha=2.0)


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x.reshape(1), dim=0, eps=1e-8).reshape(())


_TINY = [0, 1e-30, -1e-30, 1e-9, -1e-12]

# id -> (spec output, torch's built-in, points, inputs).
CASES: dict[str, tuple[str, Reference, list[float], Mapping[str, str]]] = {
    "elu_expm1": _row(
        "where(x > 0, x, 1.0 * expm1(x))", torch.nn.functional.elu, [-30, -10, -1e-4, 0, 1e-30]
    ),
    "celu_expm1": _row(
        "where(x > 0, x, 2.0 * expm1(x / 2.0))", _celu, [-100, -30, -10, -1e-4, -1e-30, 30]
    ),
    "selu_expm1": _row(
        "1.0507009873554805 * where(x > 0, x, 1.6732632423543772 * expm1(x))",
        torch.nn.functional.selu,
        [-30, -10, -1e-4, -1e-30, 10],
    ),
    "sinc_pi_x": _row(
        "where(x != 0, sin(pi * x) / (pi * x), 1)",
        torch.sinc,
        [-1e-30, 0, 1e-30, 1e-4, -0.5, 10, 30.5],
    ),
    "sin_x_over_x": _row(
        "where(x != 0, sin(x) / x, 1)",
        lambda x: torch.sinc(x / torch.pi),
        [-1e-30, 0, 1e-30, 1e-4, 1.5, -10],
    ),
    "sinc_mirrored": _row(
        "where(x == 0, 1, sin(3 * x) / (3 * x))",
        lambda x: torch.sinc(3 * x / torch.pi),
        [-1e-30, 0, 1e-30, 0.7],
    ),
    # A clamped norm that underflows to 0: the untaken 1/n must not reach the gradient.
    "clamped_norm_max": _row("x / max(sqrt(sum(x**2)), 1e-8)", _normalize, _TINY),
    "clamped_norm_clamp": _row("x / clamp(sqrt(sum(x**2)), 1e-8, 1e30)", _normalize, _TINY),
    "clamped_norm_min": _row("-x / min(-sqrt(sum(x**2)), -1e-8)", _normalize, _TINY),
    "clamped_norm_where": _row(
        "x / where(sqrt(sum(x**2)) > 1e-8, sqrt(sum(x**2)), 1e-8)", _normalize, _TINY
    ),
}


def _value_and_gradient(function: Reference, point: float, dtype: torch.dtype) -> list[float]:
    """f(x) and df/dx at a 0-d tensor of `dtype`."""
    x = torch.tensor(point, dtype=dtype, requires_grad=True)
    y = function(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return [float(y.detach()), float(grad)]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_float32_at_the_edges_is_within_the_criterion(case: str) -> None:
    expr, reference, points, inputs = CASES[case]
    spec = spec_from_dict({"name": "Edge", "inputs": dict(inputs), "outputs": {"y": expr}})
    function = load_module(spec).edge  # the outputs alone, without saved residuals
    for point in points:
        exact = _value_and_gradient(reference, point, torch.float64)
        torch32 = _value_and_gradient(reference, point, torch.float32)
        ours = _value_and_gradient(function, point, torch.float32)
        scales = [abs(exact[0]) + abs(exact[1] * point), abs(exact[1])]
        for what, mine, theirs, want, scale in zip(
            ("value", "gradient"), ours, torch32, exact, scales, strict=True
        ):
            if not torch.isfinite(torch.tensor(theirs)):
                continue
            tolerance = max(4 * abs(theirs - want), 1e-6 * scale)
            assert abs(mine - want) <= tolerance, (case, point, what, mine, want, theirs)


def test_the_sinc_pattern_is_emitted_as_torch_sinc() -> None:
    spec = spec_from_dict(
        {
            "name": "Sinc",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "where(x != 0, sin(pi * x) / (pi * x), 1)"},
        }
    )
    module = generate(spec)["sinc.py"]
    assert "y = torch.special.sinc(x)" in module
    assert "torch.sin(" not in module


# A branch condition on x0 and a number input f0 beside the constant 0.25 (issue 28, B).
GUARD_CONSTANT = "where(f0 <= tanh(x0), x0, min(f0, 0.25) * x0)"


@pytest.mark.parametrize("x0", [0.3, -0.13, 2.0])
def test_a_constant_beside_a_guarded_number_keeps_its_value(x0: float) -> None:
    spec = spec_from_dict(
        {
            "name": "Guarded",
            "inputs": {"f0": "float", "x0": "tensor"},
            "outputs": {"y": GUARD_CONSTANT},
        }
    )
    function = load_module(spec).Guarded.apply
    ours = torch.tensor(x0, requires_grad=True)
    (grad,) = torch.autograd.grad(function(1.079, ours), ours)
    theirs = torch.tensor(x0, requires_grad=True)
    value = torch.where(torch.tanh(theirs) >= 1.079, theirs, min(1.079, 0.25) * theirs)
    (expected,) = torch.autograd.grad(value, theirs)
    assert float(grad) == pytest.approx(float(expected), rel=1e-6)


def test_a_constant_beside_a_condition_takes_the_compared_values_dtype() -> None:
    """min(where(c, f0, 1), 0.25) with c = x > 0: 0.25 is of x's dtype, never c's bool."""
    x, f0, c = sympy.Symbol("x", real=True), sympy.Symbol("f0", real=True), sympy.Symbol("c")
    guarded = Minimum(where(c, f0, 1), sympy.Float(0.25))
    python = TorchPrinter(frozenset({x, c}), conditions={c: Gt(x, 0)}).doprint(guarded)
    assert "torch.tensor(0.25, dtype=x.dtype)" in python
    cpp = AtenPrinter(frozenset({x, c}), conditions={c: Gt(x, 0)}).doprint(guarded)
    assert "at::scalar_tensor(0.25, at::TensorOptions().dtype(x.scalar_type()))" in cpp


def _bce(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.binary_cross_entropy_with_logits(x, t)


_UNIT = {"type": "tensor", "domain": [0.0, 1.0]}
_BCE = "mean(-(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))))"

# Specs of several inputs, each called with 0-d tensors: id -> (spec's inputs, `where`
# and outputs, torch's function of the same inputs (float64: the reference), points as
# the inputs' values in order). Every gradient of the sum of the outputs must be within
# max(4 x torch's float32 error, 1e-6 x its size) of the float64 value.
SPEC_CASES: dict[str, tuple[dict[str, Any], Reference, list[tuple[float, ...]]]] = {
    # Alpha compositing "over" (issue 28, item 8): the backward reads the saved color in
    # c - color, where num * alpha**-2 cancelled (d/da_d 6e-4 off at a_s = 1e-30). At
    # a_s = 0, a_d = 1e-30, d/da_d is 1, where autograd of the formula as written says 0.
    "alpha_over": (
        {
            "inputs": {"a_s": _UNIT, "a_d": _UNIT, "c_s": _UNIT, "c_d": _UNIT},
            "where": {"alpha": "a_s + a_d * (1 - a_s)"},
            "outputs": {
                "alpha_out": "alpha",
                "color": "(c_s * a_s + c_d * a_d * (1 - a_s)) / alpha",
            },
        },
        over_exact,
        [(1e-30, 1e-4, 0.0, 0.9999), (1e-4, 0.0, 0.9999, 0.5), (0.0, 1e-30, 1.0, 0.5)],
    ),
    # d/dt is log_sigmoid(-x) - log_sigmoid(x), exactly -x: 4e-10 off at x = 1e-4.
    "bce_with_logits": (
        {"inputs": {"x": "tensor", "t": _UNIT}, "outputs": {"loss": _BCE}},
        _bce,
        [(1e-4, 0.5), (-1e-4, 0.0), (1e-30, 1.0), (3e-3, 0.25)],
    ),
}


def _gradients(function: Reference, point: tuple[float, ...], dtype: torch.dtype) -> list[float]:
    """The gradient of the sum of `function`'s outputs at 0-d tensors of `dtype`."""
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in point]
    outputs = function(*xs)
    total = sum(outputs) if isinstance(outputs, tuple) else outputs
    return [float(g) for g in torch.autograd.grad(total, xs)]


@pytest.mark.parametrize("case", SPEC_CASES, ids=list(SPEC_CASES))
def test_gradients_of_several_inputs_are_within_the_criterion(case: str) -> None:
    data, reference, points = SPEC_CASES[case]
    function = load_module(spec_from_dict({"name": "Edge", **data})).edge
    for point in points:
        exact = _gradients(reference, point, torch.float64)
        torch32 = _gradients(reference, point, torch.float32)
        ours = _gradients(function, point, torch.float32)
        for mine, theirs, want in zip(ours, torch32, exact, strict=True):
            tolerance = max(4 * abs(theirs - want), 1e-6 * abs(want))
            assert abs(mine - want) <= tolerance, (case, point, mine, want, theirs)


def test_a_power_of_a_quotient_does_not_overflow_in_float32() -> None:
    """(s / r)**6 is printed as the power of the quotient (one chain of squares): at s = r
    = 1e7 it is 1 in float32 with its gradients, where s**6 / r**6 is inf / inf (NaN)."""
    spec = spec_from_dict(
        {
            "name": "Ratio",
            "inputs": {"s": "tensor", "r": "tensor"},
            "outputs": {"y": "4 * (s / r)**6"},
        }
    )
    module = load_module(spec)
    assert "((s/r)**2)**3" in generate(spec)["ratio.py"].replace(" ", "")
    s = torch.tensor([1e7, 3e-7, 2.0], requires_grad=True)
    r = torch.tensor([1e7, 1e-7, 4.0], requires_grad=True)
    y = module.ratio(s, r)
    expected = 4 * (s.detach().double() / r.detach().double()) ** 6
    torch.testing.assert_close(y.double(), expected, rtol=1e-6, atol=0)
    grads = torch.autograd.grad(y.sum(), (s, r))
    sd, rd = s.detach().double().requires_grad_(), r.detach().double().requires_grad_()
    wanted = torch.autograd.grad((4 * (sd / rd) ** 6).sum(), (sd, rd))
    for got, want in zip(grads, wanted, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=0)
