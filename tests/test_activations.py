"""The activations of the language match torch.nn.functional (issue 12, item 3).

Each activation is generated from a one-line spec and compared with torch's own function
under autograd: values, first and second derivatives, at its kinks, at NaN and far out,
in float64 and float32. The backward is derived from the activation's definition, so
this is what proves the definition follows torch's conventions at every kink.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as nnf

from symgrad.api import generate, load_module, spec_from_dict
from symgrad.errors import SpecError

# Kinks of every activation below, points near them, and far out on both sides.
POINTS = [
    -100.0, -20.0, -7.0, -6.0, -3.0, -2.5, -2.0, -1.0, -0.5, -0.3, -1e-3, 0.0,
    1e-3, 0.3, 0.5, 1.0, 2.0, 2.5, 3.0, 6.0, 7.0, 20.0, 100.0,
]  # fmt: skip

ACTIVATIONS: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("silu(x)", nnf.silu),
    ("swish(x)", nnf.silu),
    ("mish(x)", nnf.mish),
    ("gelu(x)", nnf.gelu),
    ('gelu(x, approximate="none")', nnf.gelu),
    ("gelu_tanh(x)", lambda x: nnf.gelu(x, approximate="tanh")),
    ('gelu(x, approximate="tanh")', lambda x: nnf.gelu(x, approximate="tanh")),
    ("logsigmoid(x)", nnf.logsigmoid),
    ("softsign(x)", nnf.softsign),
    ("tanhshrink(x)", nnf.tanhshrink),
    ("elu(x)", nnf.elu),
    ("elu(x, 0.5)", lambda x: nnf.elu(x, 0.5)),
    ("elu(x, alpha=-2)", lambda x: nnf.elu(x, -2.0)),
    ("celu(x)", nnf.celu),
    ("celu(x, alpha=2.5)", lambda x: nnf.celu(x, 2.5)),
    ("selu(x)", nnf.selu),
    ("leaky_relu(x)", nnf.leaky_relu),
    ("leaky_relu(x, 0.2)", lambda x: nnf.leaky_relu(x, 0.2)),
    ("leaky_relu(x, negative_slope=-0.5)", lambda x: nnf.leaky_relu(x, -0.5)),
    ("hardtanh(x)", nnf.hardtanh),
    ("hardtanh(x, -2, 3)", lambda x: nnf.hardtanh(x, -2.0, 3.0)),
    ("hardtanh(x, min_val=0.5, max_val=0.5)", lambda x: nnf.hardtanh(x, 0.5, 0.5)),
    ("relu6(x)", nnf.relu6),
    ("hardsigmoid(x)", nnf.hardsigmoid),
    ("hardswish(x)", nnf.hardswish),
    ("softshrink(x)", nnf.softshrink),
    ("softshrink(x, lambd=0.3)", lambda x: nnf.softshrink(x, 0.3)),
    ("softshrink(x, 0)", lambda x: nnf.softshrink(x, 0.0)),
    ("hardshrink(x)", nnf.hardshrink),
    ("hardshrink(x, 2)", lambda x: nnf.hardshrink(x, 2.0)),
]


def _generated(expr: str, inputs: dict[str, str] | None = None) -> Any:
    return _generated_once(expr, tuple((inputs or {"x": "tensor"}).items()))


@functools.cache
def _generated_once(expr: str, inputs: tuple[tuple[str, str], ...]) -> Any:
    """Generated once per expression: both dtypes and the NaN test share it."""
    spec = spec_from_dict({"name": "Act", "inputs": dict(inputs), "outputs": {"y": expr}})
    return load_module(spec).Act.apply


def _derivatives(
    function: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> list[torch.Tensor | None]:
    """The value, the first and the second derivative at each point of `x`.

    The second is None where torch has no double backward (hardsigmoid).
    """
    x = x.detach().requires_grad_()
    y = function(x)
    (first,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    second: torch.Tensor | None = torch.zeros_like(x)
    if first.requires_grad:  # a piecewise-constant first derivative has no graph
        try:
            (second,) = torch.autograd.grad(first.sum(), x)
        except RuntimeError as error:
            assert "not implemented" in str(error)
            second = None
    return [y.detach(), first.detach(), second]


def _assert_matches(expr: str, actual: list[Any], expected: list[Any]) -> None:
    """Equal values and derivatives, NaN where torch has NaN.

    One exception: a second derivative that torch computes as NaN at a finite point
    (mish at 100 in float32 overflows inside torch's double backward) may be finite here.
    """
    for what, got, want in zip(("value", "gradient", "second"), actual, expected, strict=True):
        if want is None:
            continue
        if what == "second":
            want = torch.where(want.isnan() & got.isfinite(), got, want)
        torch.testing.assert_close(
            got, want, equal_nan=True, msg=lambda m, w=what: f"{expr}: {w}: {m}"
        )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize(("expr", "reference"), ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_torch(
    expr: str, reference: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype
) -> None:
    x = torch.tensor(POINTS, dtype=dtype)
    _assert_matches(expr, _derivatives(_generated(expr), x), _derivatives(reference, x))


@pytest.mark.parametrize(("expr", "reference"), ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_at_nan_matches_torch(
    expr: str, reference: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """At NaN symgrad follows torch's scalar kernel, which a one-element tensor runs.

    (torch's vectorised CPU kernels disagree with their own scalar tail at NaN for
    hardtanh, relu6, the shrinks and, in float64, elu and hardswish: the gradient then
    depends on the element's position in the tensor. symgrad's does not.)
    """
    x = torch.tensor([math.nan], dtype=torch.float64)
    _assert_matches(expr, _derivatives(_generated(expr), x), _derivatives(reference, x))


def test_the_forward_calls_torchs_fused_function() -> None:
    spec = {"name": "Act", "inputs": {"x": "tensor"}, "outputs": {"y": "leaky_relu(x, 0.2)"}}
    source = generate(spec_from_dict(spec))["act.py"]
    assert "torch.nn.functional.leaky_relu(x, negative_slope=0.2)" in source


@pytest.mark.parametrize(
    ("expr", "value", "reference"),
    [
        ("elu(a) * x", -1.5, nnf.elu),
        ("silu(a) * x", 2.0, nnf.silu),
        ("hardswish(a) * x", 1.0, nnf.hardswish),
        ("leaky_relu(a, 0.3) * x", -2.0, lambda t: nnf.leaky_relu(t, 0.3)),
    ],
)
def test_activation_of_a_number_input(
    expr: str, value: float, reference: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """On a number the activation is its definition in Python's math: the same value."""
    function = _generated(expr, {"x": "tensor", "a": "float"})
    x = torch.ones((), dtype=torch.float64)
    expected = reference(torch.tensor(value, dtype=torch.float64))
    torch.testing.assert_close(function(x, value), expected)


def test_a_number_input_parameter_reaches_torch() -> None:
    function = _generated("elu(x, alpha) + softshrink(x, lambd)", {
        "x": "tensor", "alpha": "float", "lambd": "float"
    })  # fmt: skip
    x = torch.tensor(POINTS[:-1], dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(function(x, 0.7, 1.5), nnf.elu(x, 0.7) + nnf.softshrink(x, 1.5))
    assert torch.autograd.gradcheck(lambda t: function(t, 0.7, 1.5), (x[2:10],))


BAD_CALLS = [
    ("gelu_new(x)", "unknown function 'gelu_new' (did you mean 'gelu_tanh' or 'gelu'?)"),
    ("silu(x, 2)", "silu() takes 1 argument, got 2"),
    ("elu(x, 1, 2)", "elu() takes 1 to 2 arguments, got 3"),
    ("elu(x, beta=1)", "elu() has no argument 'beta'"),
    ("elu(x, 1, alpha=2)", "elu() got 'alpha' twice"),
    ("celu(x, 0)", "celu's alpha cannot be 0"),
    ("softshrink(x, -0.5)", "softshrink's lambd must be at least 0"),
    ("hardtanh(x, 1, -1)", "hardtanh's min_val cannot be greater than max_val"),
    ('gelu(x, approximate="fast")', 'gelu() approximate must be "none" or "tanh"'),
    ("elu(x, x)", "elu() takes alpha as a number (a constant or a number input), not a tensor"),
]


@pytest.mark.parametrize(("expr", "message"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_activation_calls_are_refused(expr: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        load_module(
            spec_from_dict({"name": "Act", "inputs": {"x": "tensor"}, "outputs": {"y": expr}})
        )
    assert message in str(error.value)
