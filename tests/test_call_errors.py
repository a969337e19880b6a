"""The generated module's errors at call time: the input at fault, named."""

from __future__ import annotations

import pytest
import torch

import symgrad

SPEC = {
    "name": "TanhMul",
    "inputs": {"x": "tensor", "w": "tensor", "s": {"type": "float", "default": 1.0}},
    "outputs": {"y": "s * tanh(x) * w + sum(x, dim=-1, keepdim=True)"},
}


@pytest.fixture(scope="module")
def tanh_mul() -> object:
    return symgrad.load_module(symgrad.spec_from_dict(SPEC)).tanh_mul


def test_a_number_for_a_tensor_input_is_named(tanh_mul: object) -> None:
    x = torch.randn(4, 7, requires_grad=True)
    with pytest.raises(TypeError) as error:
        tanh_mul(x, 0.5)  # type: ignore[operator]
    assert str(error.value) == (
        "tanh_mul(): expected a value of type 'Tensor' for argument 'w'"
        " but instead found type 'float'"
    )


def test_shapes_that_do_not_broadcast_are_named(tanh_mul: object) -> None:
    x, w = torch.randn(4, 7, requires_grad=True), torch.randn(8)
    with pytest.raises(RuntimeError) as error:
        tanh_mul(x, w)  # type: ignore[operator]
    assert str(error.value) == "tanh_mul(): the shapes of x [4, 7] and w [8] do not broadcast"


def test_other_failures_keep_torch_s_error(tanh_mul: object) -> None:
    x, w = torch.randn(4, 7, device="meta"), torch.randn(7)
    with pytest.raises(RuntimeError) as error:
        tanh_mul(x, w)  # type: ignore[operator]
    assert "tanh_mul()" not in str(error.value)


def test_inputs_inside_a_reduction_are_not_grouped() -> None:
    from symgrad.backends.python.call_checks import broadcast_groups

    spec = symgrad.spec_from_dict(
        {
            "name": "Reduced",
            "inputs": {"x": "tensor", "v": "tensor", "w": "tensor"},
            "outputs": {"y": "w * x + sum(v, dim=-1)"},
        }
    )
    assert broadcast_groups(spec) == (("x", "w"),)
