"""A gradient times a `where` of a number and 0 multiplies by the boolean, a `where` of
two numbers exact in every dtype (small integers, halves) is the boolean cast, scaled and
shifted, and one of 1 and a number scales the gradient where the condition fails
(Note [Selects of numbers] in symgrad.backends.forms.selects): the same values as the
select, NaN and inf in the incoming gradient included, in every dtype, with double
backward."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch

import symgrad

Condition = Callable[[torch.Tensor], torch.Tensor]

# case -> (the custom gradient of y = abs(x), how the backward spells it, the condition,
# its two numbers)
GRADIENTS: dict[str, tuple[str, str, Condition, tuple[float, float]]] = {
    "straight-through inside [-1, 1]": (
        "where(abs(x) <= 1, 1, 0)",
        "grad_y * (y <= 1)",  # abs(x) is the output y, read saved
        lambda x: x.abs() <= 1,
        (1.0, 0.0),
    ),
    "scaled outside": (
        "where(abs(x) <= 1, 0, -3)",
        "grad_y * (~(y <= 1)) * (-3)",
        lambda x: x.abs() <= 1,
        (0.0, -3.0),
    ),
    "a half and one (a max's gradient at a tie): the cast boolean, scaled and shifted": (
        "where(x == 1, 0.5, 1)",
        ".mul_(-0.5).add_(1)",
        lambda x: x == 1,
        (0.5, 1.0),
    ),
    "two integers (brevitas's binary sign): the cast boolean, scaled and shifted": (
        "where(x >= 0, 1, -1)",
        "grad_y * (x >= 0).to(x.dtype).mul_(2).add_(-1)",
        lambda x: x >= 0,
        (1.0, -1.0),
    ),
}


def _abs_with_gradient(gradient: str, spelled: str) -> Any:
    """The module of y = abs(x) with `gradient` as its chosen gradient, whose backward
    spells it as `spelled`."""
    spec = {
        "name": "Case",
        "inputs": {"x": "tensor"},
        "outputs": {"y": "abs(x)"},
        "gradients": {"y": {"x": gradient}},
    }
    module = symgrad.load_module(symgrad.spec_from_dict(spec))
    assert spelled in inspect.getsource(module.Case.backward)
    return module


@pytest.mark.parametrize("case", GRADIENTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_a_select_of_numbers_is_a_product_with_the_boolean(case: str, dtype: torch.dtype) -> None:
    gradient, spelled, condition, (a, b) = GRADIENTS[case]
    module = _abs_with_gradient(gradient, spelled)
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 1.0], dtype=dtype)
    x.requires_grad_()
    grad_y = torch.tensor([1.0, 2.0, -1.0, 4.0, float("inf"), -0.5, float("nan"), 1e-30])
    grad_y = grad_y.to(dtype).requires_grad_()
    (got,) = torch.autograd.grad(module.case(x), x, grad_y, create_graph=True)
    select = torch.where(condition(x.detach()), torch.tensor(a, dtype=dtype), b)
    assert got.dtype == dtype
    torch.testing.assert_close(got, grad_y * select, equal_nan=True, rtol=0, atol=0)
    # Double backward: d(grad_x)/d(grad_y) is the select itself.
    (second,) = torch.autograd.grad(got, grad_y, torch.ones_like(got))
    torch.testing.assert_close(second, select, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_a_relu_gradient_is_torchs_threshold_backward(dtype: torch.dtype) -> None:
    """where(x <= 0, 0, g * ...) is torch's threshold_backward: 0 at and below 0, the
    branch above and at a NaN x (x <= 0 is false there), in the dtype, with its double
    backward."""
    spec = {
        "name": "Case",
        "inputs": {"x": "tensor", "w": "tensor"},
        "outputs": {"y": "w * relu(x)**2"},
    }
    module = symgrad.load_module(symgrad.spec_from_dict(spec))
    assert "torch.ops.aten.threshold_backward(" in inspect.getsource(module.Case.backward)
    x = torch.tensor([float("nan"), -1.0, 0.0, 0.5, 2.0], dtype=dtype).requires_grad_()
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=dtype).requires_grad_()
    grad_y = torch.tensor([1.0, float("inf"), float("nan"), 2.0, -1.0], dtype=dtype)
    grad_y.requires_grad_()
    got = torch.autograd.grad(module.case(x, w), (x, w), grad_y, create_graph=True)
    expected = torch.autograd.grad(w * torch.relu(x) ** 2, (x, w), grad_y, create_graph=True)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g, e, equal_nan=True)
    second = torch.autograd.grad(got[0].nansum(), (grad_y, w), allow_unused=True)
    expected_second = torch.autograd.grad(expected[0].nansum(), (grad_y, w), allow_unused=True)
    for g, e in zip(second, expected_second, strict=True):
        torch.testing.assert_close(g, e, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_saved_sign_mask_reads_back_as_a_sign(dtype: torch.dtype) -> None:
    """brevitas's binary sign under `save: memory` saves the bool mask x >= 0, and the
    backward's where(mask, g, -g) is g times the mask's sign: inf and NaN kept."""
    spec = {
        "name": "Case",
        "save": "memory",
        "inputs": {"x": "tensor"},
        "outputs": {"y": "abs(x)"},
        "gradients": {"y": {"x": "where(x >= 0, 1, -1)"}},
    }
    module = symgrad.load_module(symgrad.spec_from_dict(spec))
    assert "grad_y * mask.to(grad_y.dtype).mul_(2).add_(-1)" in inspect.getsource(
        module.Case.backward
    )
    x = torch.tensor([float("nan"), -1.0, 0.0, 0.5, -2.0], dtype=dtype).requires_grad_()
    grad_y = torch.tensor([1.0, float("inf"), float("nan"), -2.0, 3.0], dtype=dtype)
    (got,) = torch.autograd.grad(module.case(x), x, grad_y)
    expected = torch.where(x.detach() >= 0, grad_y, -grad_y)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)


# case -> (the custom gradient of y = abs(x), how the backward spells it, the condition,
# the number where it does not hold)
SCALED: dict[str, tuple[str, str, Condition, float]] = {
    "leaky relu's slope: torch's leaky_relu_backward": (
        "where(x > 0, 1, 0.01)",
        "torch.ops.aten.leaky_relu_backward(grad_y, x, 0.01, False)",
        lambda x: x > 0,
        0.01,
    ),
    "one inside, a number outside: a where of the gradient, no 0-d tensor": (
        "where(abs(x) <= 1, 1, 0.3)",
        "torch.where((y <= 1), grad_y, 0.3 * grad_y)",
        lambda x: x.abs() <= 1,
        0.3,
    ),
}


@pytest.mark.parametrize("case", SCALED)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_a_select_of_one_and_a_number_scales_the_gradient(case: str, dtype: torch.dtype) -> None:
    """g * where(c, 1, s) as where(c, g, g * s): g itself where c holds, g times the number
    (in the dtype's opmath, as torch multiplies by a number) elsewhere; in float32 and
    float64 bit for bit the product with the select."""
    gradient, spelled, condition, slope = SCALED[case]
    module = _abs_with_gradient(gradient, spelled)
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, float("nan"), 1.0], dtype=dtype)
    x.requires_grad_()
    grad_y = torch.tensor([1.0, 2.0, -1.0, 4.0, float("inf"), -0.5, 3.0, float("nan")])
    grad_y = grad_y.to(dtype).requires_grad_()
    (got,) = torch.autograd.grad(module.case(x), x, grad_y, create_graph=True)
    cond = condition(x.detach())
    assert got.dtype == dtype
    expected = torch.where(cond, grad_y, grad_y * slope)
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
    select = torch.where(cond, torch.tensor(1.0, dtype=dtype), slope)
    if dtype != torch.bfloat16:
        torch.testing.assert_close(got, grad_y * select, equal_nan=True, rtol=0, atol=0)
    # Double backward: d(grad_x)/d(grad_y) is the select.
    (second,) = torch.autograd.grad(got, grad_y, torch.ones_like(got))
    torch.testing.assert_close(second, select, rtol=0, atol=0)
