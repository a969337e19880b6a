"""CPU forms of torch kernels (symgrad.backends.python.kernels) agree with the kernels."""

from __future__ import annotations

import pytest
import torch

import symgrad
from symgrad.backends.python import kernels

MISH = {"name": "Mish", "inputs": {"x": "tensor"}, "outputs": {"y": "x * tanh(softplus(x))"}}


def test_mish_cpu_form_matches_torch_in_float32_up_to_100() -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(MISH))
    x = torch.linspace(-100, 100, 20001, dtype=torch.float32)
    exact = x.double().requires_grad_()
    value = torch.nn.functional.mish(exact)
    (slope,) = torch.autograd.grad(value.sum(), exact)
    grad = torch.ones_like(x)
    ours, ours_slope = module._mish(x), module._mish_backward(grad, x)
    kernel, kernel_slope = torch.nn.functional.mish(x), torch.ops.aten.mish_backward(grad, x)
    for got, reference, truth in ((ours, kernel, value), (ours_slope, kernel_slope, slope)):
        error = (got.double() - truth.detach()).abs()
        kernel_error = (reference.double() - truth.detach()).abs()
        # Within the kernel's own worst error, plus an ulp of the value.
        assert error.max() <= kernel_error.max() + 2**-23 * truth.detach().abs().max()
        assert not got.isnan().any()


def test_mish_cpu_form_is_what_the_module_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(MISH))
    with monkeypatch.context() as patched:  # float32 on CPU: neither kernel is called
        patched.setattr(torch.nn.functional, "mish", _refuse)
        patched.setattr(torch.ops.aten, "mish_backward", _refuse)
        x = torch.randn(kernels.CPU_FORM_MIN_ELEMENTS, requires_grad=True)
        (gradient,) = torch.autograd.grad(module.mish(x).sum(), x)
    y = module.mish(x)
    torch.testing.assert_close(y, torch.nn.functional.mish(x))
    (expected,) = torch.autograd.grad(torch.nn.functional.mish(x).sum(), x)
    torch.testing.assert_close(gradient, expected)


def test_small_tensors_take_torch_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below CPU_FORM_MIN_ELEMENTS the form's several kernels cost more than torch's one."""
    module = symgrad.load_module(symgrad.spec_from_dict(MISH))
    monkeypatch.setattr(module, "_mish_block", _refuse)
    monkeypatch.setattr(module, "_mish_backward_block", _refuse)
    x = torch.randn(kernels.CPU_FORM_MIN_ELEMENTS - 1, requires_grad=True)
    y = module.mish(x)
    (gradient,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert torch.equal(y, torch.nn.functional.mish(x))
    assert torch.equal(gradient, torch.ops.aten.mish_backward(torch.ones_like(x), x))


def _refuse(*args: object) -> None:
    raise AssertionError("torch's mish kernel ran")


def test_cpu_forms_run_in_blocks_with_the_same_values() -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(MISH))
    block = (1 << 17) * max(2, torch.get_num_threads())  # 2**17 elements a thread
    x = torch.randn(3 * block + 5, dtype=torch.float64)  # three blocks and a remainder
    grad = torch.randn_like(x)
    calls: list[int] = []

    def counted(*tensors: torch.Tensor) -> torch.Tensor:
        calls.append(tensors[0].numel())
        return module._mish_backward_block(*tensors)

    blocked = module._in_blocks(counted, grad, x)
    assert calls == [block, block, block, 5]
    # Equal up to rounding: a vectorised kernel may treat a block's tail elements apart.
    exact = {"rtol": 1e-14, "atol": 1e-14}
    torch.testing.assert_close(blocked, module._mish_backward_block(grad, x), **exact)
    torch.testing.assert_close(module._mish(x), module._mish_block(x), **exact)


@pytest.mark.parametrize(
    "case",
    ["strided", "broadcast", "dtypes"],
)
def test_cpu_forms_run_whole_where_blocks_cannot_split(case: str) -> None:
    module = symgrad.load_module(symgrad.spec_from_dict(MISH))
    size = (1 << 17) * max(2, torch.get_num_threads()) + 1
    x = torch.randn(2, size)
    grad = {
        "strided": torch.randn(size, 2).t(),
        "broadcast": torch.randn(1, size),
        "dtypes": torch.randn(2, size, dtype=torch.float64),
    }[case]
    calls: list[torch.Size] = []

    def counted(*tensors: torch.Tensor) -> torch.Tensor:
        calls.append(tensors[0].shape)
        return module._mish_backward_block(*tensors)

    result = module._in_blocks(counted, grad, x)
    assert calls == [grad.shape]
    torch.testing.assert_close(result, module._mish_backward_block(grad, x), rtol=0, atol=0)
