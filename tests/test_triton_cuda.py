"""The Triton kernels of `mode: fused` on a GPU (skipped without CUDA): values and gradients
against the Function in float32 and bfloat16, block remainders, a per-channel input, losses
(a mean and a sum over every element, a mean per row), two outputs (one's gradient None), the eager
Function's saved tensors (the inputs, nothing stored for the backward), double backward,
the registered operator under torch.library.opcheck, and torch.compile(fullgraph=True)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import symgrad.api as api

# Importing inductor (torch.compile) in torch 2.11 warns of its own torch.jit use.
# Dynamo (torch 2.11) warns of a .grad read as it traces the screened case's float64
# reference, the Function in fused mode.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf"),
]

CASES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "mish": ({"x": "tensor"}, {"y": "x * tanh(softplus(x))"}),
    "softplus": ({"x": "tensor"}, {"y": "softplus(x)"}),
    "swish": ({"x": "tensor", "beta": "tensor"}, {"y": "x * sigmoid(beta * x)"}),
    "screened": ({"x": "tensor"}, {"y": "4 * (x**-12 - x**-6) * exp(-x / 2)"}),
    "huber_mean": (
        {"x": "tensor", "t": "tensor"},
        {"y": "mean(where(abs(x - t) < 1, 0.5 * (x - t)**2, abs(x - t) - 0.5))"},
    ),
    "squares_sum": ({"x": "tensor", "t": "tensor"}, {"y": "sum((x - t)**2 * sin(x))"}),
    "huber_rows": (
        {"x": "tensor", "t": "tensor"},
        {"y": "mean(where(abs(x - t) < 1, 0.5 * (x - t)**2, abs(x - t) - 0.5), dim=-1)"},
    ),
    "two": ({"x": "tensor", "beta": "tensor"}, {"y": "sin(x) * beta", "z": "exp(x) + beta"}),
}
CHANNELS = 1027  # not a multiple of the block


def _module(name: str) -> Any:
    inputs, outputs = CASES[name]
    spec = api.spec_from_dict({"name": "Case", "inputs": inputs, "outputs": outputs})
    return api.load_module(dataclasses.replace(spec, mode="fused", module=f"cuda_{name}"))


def _inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    x = torch.randn(5, CHANNELS, device="cuda") * 4
    if name == "screened":
        x = torch.rand(5, CHANNELS, device="cuda") + 0.8
    made = [x]
    if name in ("swish", "two"):
        made.append(torch.rand(CHANNELS, device="cuda") + 0.5)
    if name in ("huber_mean", "squares_sum"):
        made.append(x + torch.randn_like(x))
    if name == "huber_rows":  # a target per channel
        made.append(torch.randn(CHANNELS, device="cuda") * 4)
    return [t.to(dtype).requires_grad_() for t in made]


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    """A function's outputs as a tuple, one or several."""
    return result if isinstance(result, tuple) else (result,)


def _total(result: Any) -> torch.Tensor:
    """The sum of every element of every output."""
    return torch.stack([y.sum() for y in _outputs(result)]).sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(CASES))
def test_kernels_match_the_function(name: str, dtype: torch.dtype) -> None:
    module = _module(name)
    fused, plain = getattr(module, f"cuda_{name}"), getattr(module, f"_plain_cuda_{name}")
    args = _inputs(name, dtype)
    ys = _outputs(fused(*args))
    assert all(type(y.grad_fn).__name__ == "_CaseTritonBackward" for y in ys), ys
    exact = [a.detach().double().requires_grad_() for a in args]
    references = _outputs(plain(*exact))
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    for y, reference in zip(ys, references, strict=True):
        scale = max(1.0, reference.abs().max().item())
        torch.testing.assert_close(y.double(), reference, atol=tolerance * scale, rtol=tolerance)
    gs = [torch.randn_like(y) for y in ys]
    got_grads = torch.autograd.grad(ys, args, gs)
    wanted = torch.autograd.grad(references, exact, [g.double() for g in gs])
    for got, want in zip(got_grads, wanted, strict=True):
        scale = max(1.0, want.abs().max().item())
        gtol = 1e-4 if dtype == torch.float32 else 4e-2
        torch.testing.assert_close(got.double(), want, atol=gtol * scale, rtol=gtol)


def test_a_missing_gradient_is_zero() -> None:
    module = _module("two")
    fused, plain = module.cuda_two, module._plain_cuda_two
    args = _inputs("two", torch.float32)
    missing, by_read = [], module._triton_read
    module._triton_read = lambda t, *rest: missing.append(t is None) or by_read(t, *rest)
    for k in range(2):  # each output's gradient alone, the other's None
        got = torch.autograd.grad(fused(*args)[k].sum(), args)
        want = torch.autograd.grad(plain(*args)[k].sum(), args)
        torch.testing.assert_close(got, want)
    assert missing == [False, True, True, False], missing


@pytest.mark.parametrize("name", list(CASES))
def test_the_operator_passes_opcheck(name: str) -> None:
    _module(name)
    operator = getattr(torch.ops.symgrad, f"cuda_{name}_triton_forward").default
    torch.library.opcheck(operator, [a.detach() for a in _inputs(name, torch.float32)])


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_with_fullgraph_matches(name: str) -> None:
    fused = getattr(_module(name), f"cuda_{name}")
    args = _inputs(name, torch.float32)
    compiled = torch.compile(fused, fullgraph=True)
    ys, wants = _outputs(compiled(*args)), _outputs(fused(*args))
    torch.testing.assert_close(ys, wants)
    gs = [torch.randn_like(y) for y in ys]
    expected_grads = torch.autograd.grad(wants, args, gs)
    for got, expected in zip(torch.autograd.grad(ys, args, gs), expected_grads, strict=True):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(CASES))
def test_the_eager_function_saves_no_new_buffer(name: str, dtype: torch.dtype) -> None:
    module = _module(name)
    fused = getattr(module, f"cuda_{name}")
    args = _inputs(name, dtype)
    packed: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        ys = _outputs(fused(*args))
    gs = [torch.randn_like(y) for y in ys]
    reduced, by_torch = [], module._triton_summed
    module._triton_summed = lambda g, shape: reduced.append(g.shape == shape) or by_torch(g, shape)
    kept = torch.autograd.grad(ys, args, gs, retain_graph=True)
    got = torch.autograd.grad(ys, args, gs)
    # Every gradient reaches torch of its input's shape: swish's per-channel beta summed
    # in the kernel.
    assert reduced and all(reduced), reduced
    torch.testing.assert_close(got, kept, atol=0, rtol=0)
    own = {t.data_ptr() for t in (*args, *ys)}
    assert packed and all(p.data_ptr() in own for p in packed), name
    if name in ("mish", "softplus", "huber_mean", "squares_sum", "huber_rows", "two"):
        # the inputs alone, as torch.compile saves
        assert [p.data_ptr() for p in packed] == [a.data_ptr() for a in args]


@pytest.mark.parametrize("name", list(CASES))
def test_double_backward_runs_the_function(name: str) -> None:
    module = _module(name)
    fused, plain = getattr(module, f"cuda_{name}"), getattr(module, f"_plain_cuda_{name}")
    args = _inputs(name, torch.float32)
    # Each case's backward kernel reads its inputs: no triton_keeps_inputs needed.
    first = torch.autograd.grad(_total(fused(*args)), args, create_graph=True)
    plain_first = torch.autograd.grad(_total(plain(*args)), args, create_graph=True)
    torch.testing.assert_close(first, plain_first)
    sums = [sum(g.sum() for g in gs) for gs in (first, plain_first)]
    got, want = (torch.autograd.grad(t, args, materialize_grads=True) for t in sums)
    torch.testing.assert_close(got, want)
