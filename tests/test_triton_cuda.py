"""The Triton kernels of `mode: fused` on a GPU (skipped without CUDA): values and gradients
against the Function in float32 and bfloat16, block remainders, a per-channel input, the
eager Function's saved tensors (the inputs, nothing stored for the backward), double
backward, the registered operator under torch.library.opcheck, and
torch.compile(fullgraph=True)."""

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

CASES = {
    "mish": ({"x": "tensor"}, "x * tanh(softplus(x))"),
    "softplus": ({"x": "tensor"}, "softplus(x)"),
    "swish": ({"x": "tensor", "beta": "tensor"}, "x * sigmoid(beta * x)"),
    "screened": ({"x": "tensor"}, "4 * (x**-12 - x**-6) * exp(-x / 2)"),
}
CHANNELS = 1027  # not a multiple of the block


def _module(name: str) -> Any:
    inputs, formula = CASES[name]
    spec = api.spec_from_dict({"name": "Case", "inputs": inputs, "outputs": {"y": formula}})
    return api.load_module(dataclasses.replace(spec, mode="fused", module=f"cuda_{name}"))


def _inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    x = torch.randn(5, CHANNELS, device="cuda") * 4
    if name == "screened":
        x = torch.rand(5, CHANNELS, device="cuda") + 0.8
    made = [x]
    if name == "swish":
        made.append(torch.rand(CHANNELS, device="cuda") + 0.5)
    return [t.to(dtype).requires_grad_() for t in made]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(CASES))
def test_kernels_match_the_function(name: str, dtype: torch.dtype) -> None:
    module = _module(name)
    fused, plain = getattr(module, f"cuda_{name}"), getattr(module, f"_plain_cuda_{name}")
    args = _inputs(name, dtype)
    y = fused(*args)
    assert type(y.grad_fn).__name__ == "_CaseTritonBackward", type(y.grad_fn).__name__
    exact = [a.detach().double().requires_grad_() for a in args]
    reference = plain(*exact)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(y.double(), reference, atol=tolerance, rtol=tolerance)
    g = torch.randn_like(y)
    got_grads = torch.autograd.grad(y, args, g)
    wanted = torch.autograd.grad(reference, exact, g.double())
    for got, want in zip(got_grads, wanted, strict=True):
        scale = max(1.0, want.abs().max().item())
        gtol = 1e-4 if dtype == torch.float32 else 4e-2
        torch.testing.assert_close(got.double(), want, atol=gtol * scale, rtol=gtol)


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
    y, want = compiled(*args), fused(*args)
    torch.testing.assert_close(y, want)
    g = torch.randn_like(y)
    expected_grads = torch.autograd.grad(want, args, g)
    for got, expected in zip(torch.autograd.grad(y, args, g), expected_grads, strict=True):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(CASES))
def test_the_eager_function_saves_no_new_buffer(name: str, dtype: torch.dtype) -> None:
    module = _module(name)
    fused = getattr(module, f"cuda_{name}")
    args = _inputs(name, dtype)
    packed: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        y = fused(*args)
    g = torch.randn_like(y)
    reduced, by_torch = [], module._triton_summed
    module._triton_summed = lambda g, shape: reduced.append(g.shape == shape) or by_torch(g, shape)
    kept = torch.autograd.grad(y, args, g, retain_graph=True)
    got = torch.autograd.grad(y, args, g)
    # Every gradient reaches torch of its input's shape: swish's per-channel beta summed
    # in the kernel.
    assert reduced and all(reduced), reduced
    torch.testing.assert_close(got, kept, atol=0, rtol=0)
    own = {t.data_ptr() for t in (*args, y)}
    assert packed and all(p.data_ptr() in own for p in packed), name
    if name in ("mish", "softplus"):  # the input alone, as torch.compile saves
        assert [p.data_ptr() for p in packed] == [args[0].data_ptr()]


@pytest.mark.parametrize("name", list(CASES))
def test_double_backward_runs_the_function(name: str) -> None:
    module = _module(name)
    fused, plain = getattr(module, f"cuda_{name}"), getattr(module, f"_plain_cuda_{name}")
    args = _inputs(name, torch.float32)
    # Each case's backward kernel reads its inputs: no triton_keeps_inputs needed.
    first = torch.autograd.grad(fused(*args).sum(), args, create_graph=True)
    plain_first = torch.autograd.grad(plain(*args).sum(), args, create_graph=True)
    torch.testing.assert_close(first, plain_first)
    sums = [sum(g.sum() for g in gs) for gs in (first, plain_first)]
    got, want = (torch.autograd.grad(total, args) for total in sums)
    torch.testing.assert_close(got, want)
