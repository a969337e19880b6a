"""Gradient overrides that read `grad` (Note [Overrides that read grad]).

kornia's straight-through estimator (`STEFunction` with `grad_fn=F.hardtanh`) returns a
value computed elsewhere and sends each tensor `hardtanh(grad.sum_to_size(its shape))`:
examples/kornia_ste.yaml must give exactly that, first and second order. An override
that reads `grad` linearly must agree with the plain override it equals, and a
Function with such an override must refuse forward-mode AD rather than guess a jvp.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import symgrad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _kornia_backward(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """kornia's STEFunction.backward for one tensor, with grad_fn=F.hardtanh."""
    return torch.nn.functional.hardtanh(grad.sum_to_size(shape))


def _load(data: dict[str, Any]) -> Any:
    spec = symgrad.spec_from_dict({"name": "Override", **data})
    return getattr(symgrad.load_module(spec), spec.module)


@pytest.mark.parametrize(
    ("input_shape", "output_shape"), [((3, 4), (3, 4)), ((4,), (3, 4)), ((1, 4), (2, 3, 4))]
)
def test_kornia_ste_matches_its_original(
    input_shape: tuple[int, ...], output_shape: tuple[int, ...]
) -> None:
    function = symgrad.load(EXAMPLES / "kornia_ste.yaml").apply
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(input_shape, generator=generator, dtype=torch.float64, requires_grad=True)
    out = torch.randn(output_shape, generator=generator, dtype=torch.float64, requires_grad=True)
    y = function(x, out)
    assert torch.equal(y, out)
    grad = 3 * torch.randn(output_shape, generator=generator, dtype=torch.float64)
    grad_x, grad_out = torch.autograd.grad(y, (x, out), grad)
    torch.testing.assert_close(grad_x, _kornia_backward(grad, x.shape), rtol=0, atol=0)
    torch.testing.assert_close(grad_out, _kornia_backward(grad, out.shape), rtol=0, atol=0)
    assert (grad.abs() > 1).any() and grad_out.abs().max() == 1  # the clip did act


def test_the_second_order_differentiates_the_override() -> None:
    """d(grad_x)/d(grad) of clamp(grad, -1, 1) is 1 inside [-1, 1] and 0 outside."""
    function = symgrad.load(EXAMPLES / "kornia_ste.yaml").apply
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    out = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    grad = torch.tensor([[0.1, 2.0, -0.5, -3.0]] * 3, dtype=torch.float64, requires_grad=True)
    (grad_x,) = torch.autograd.grad(function(x, out), x, grad, create_graph=True)
    (second,) = torch.autograd.grad(grad_x.sum(), grad)
    inside = (grad.sum(0).abs() <= 1).to(torch.float64).expand(3, 4)
    torch.testing.assert_close(second, inside)
    assert torch.autograd.gradgradcheck(function, (x, out))


def test_an_override_linear_in_grad_equals_the_plain_override() -> None:
    shared = {"inputs": {"x": "tensor"}, "outputs": {"y": "round(x)"}}
    plain = _load({**shared, "gradients": {"y": {"x": "tanh(x)"}}})
    reading = _load({**shared, "gradients": {"y": {"x": "grad * tanh(x)"}}})
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(5, dtype=torch.float64)
    want = torch.autograd.grad(plain(x), x, grad)
    torch.testing.assert_close(torch.autograd.grad(reading(x), x, grad), want)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_forward_mode_ad_is_refused_not_guessed() -> None:
    function = symgrad.load(EXAMPLES / "kornia_ste.yaml").apply
    x, out = torch.randn(4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="jvp"):
        torch.func.jvp(lambda x: function(x, out), (x,), (torch.ones_like(x),))


def test_a_spec_name_grad_shadows_the_incoming_gradient() -> None:
    """`grad` declared as an input is that input: the override is a plain derivative."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Shadow",
            "inputs": {"x": "tensor", "grad": "tensor"},
            "outputs": {"y": "x * grad"},
            "gradients": {"y": {"x": "grad"}},
        }
    )
    assert not spec.overrides[0].reads_grad
    function = getattr(symgrad.load_module(spec), spec.module)
    x, g = (torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    cotangent = torch.randn(3, dtype=torch.float64)
    (grad_x,) = torch.autograd.grad(function(x, g), x, cotangent)
    torch.testing.assert_close(grad_x, cotangent * g)
