"""Generated Functions inside the PyTorch ecosystem: torch.compile, torch.func, export.

Each row is a module in generated/ and the shapes of its tensor inputs; every check
compares the transform's result with plain eager calls (or with a loop over examples).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as forward_ad

from tests.conftest import as_tuple, load_generated

# torch.compile warns about every autograd.Function it traces (torch 2.13), and forward
# AD loads decompositions through the deprecated torch.jit.script.
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

# module -> shape of each tensor argument (number arguments keep their defaults).
CASES: dict[str, tuple[tuple[int, ...], ...]] = {
    "soft_clamp": ((3, 5),),
    "swish": ((3, 5), (5,)),
    "polar": ((3, 5), (3, 5)),
    "straight_through_round": ((3, 5),),
    "rms_norm": ((3, 16), (16,)),
    "layer_norm_affine": ((3, 16), (16,), (16,)),
    "softmax": ((3, 10),),
    "l2_normalize": ((3, 16),),
    "mse_loss": ((3, 10), (3, 10)),
}


def _function(module: str) -> Callable[..., Any]:
    function: Callable[..., Any] = getattr(load_generated(module), module)
    return function


def _inputs(module: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        (0.5 + torch.rand(shape, generator=generator, dtype=torch.float64))
        for shape in CASES[module]
    )


def _total(function: Callable[..., Any], *args: torch.Tensor) -> torch.Tensor:
    """A scalar that depends on every output, for grad and compile checks."""
    outputs = as_tuple(function(*args))
    return functools.reduce(torch.add, [(o * (k + 1)).sum() for k, o in enumerate(outputs)])


@pytest.mark.parametrize("module", CASES)
def test_torch_compile_fullgraph_gives_the_same_values_and_gradients(module: str) -> None:
    function = _function(module)
    torch._dynamo.reset()
    compiled = torch.compile(
        functools.partial(_total, function), fullgraph=True, backend="aot_eager"
    )
    inputs = [x.requires_grad_() for x in _inputs(module)]
    eager = [x.detach().clone().requires_grad_() for x in inputs]
    value = compiled(*inputs)
    want = _total(function, *eager)
    torch.testing.assert_close(value, want)
    grads = torch.autograd.grad(value, inputs)
    wants = torch.autograd.grad(want, eager)
    for grad, expected in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, expected)


@pytest.mark.parametrize("module", CASES)
def test_vmap_of_grad_matches_a_loop(module: str) -> None:
    function = _function(module)
    examples = [_inputs(module, seed) for seed in range(3)]
    batched = [torch.stack(column) for column in zip(*examples, strict=True)]
    argnums = tuple(range(len(batched)))
    grad = torch.func.grad(functools.partial(_total, function), argnums=argnums)
    grads = torch.func.vmap(grad)(*batched)
    for k, example in enumerate(examples):
        for batch, single in zip(grads, grad(*example), strict=True):
            torch.testing.assert_close(batch[k], single)


@pytest.mark.parametrize("module", CASES)
def test_jacrev_and_jacfwd_agree(module: str) -> None:
    """Reverse mode (backward) and forward mode (jvp) give the same Jacobian."""
    function = _function(module)
    inputs = _inputs(module)

    def first_output(*args: torch.Tensor) -> torch.Tensor:
        return as_tuple(function(*args))[0]

    argnums = tuple(range(len(inputs)))
    reverse = torch.func.jacrev(first_output, argnums=argnums)(*inputs)
    forward = torch.func.jacfwd(first_output, argnums=argnums)(*inputs)
    for a, b in zip(reverse, forward, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("module", CASES)
def test_forward_ad_dual_tensors(module: str) -> None:
    """torch.autograd.forward_ad tangents equal the Jacobian (from the backward) times them."""
    function = _function(module)
    inputs = _inputs(module)
    tangents = _inputs(module, seed=5)
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(x, t) for x, t in zip(inputs, tangents, strict=True)]
        outputs = as_tuple(function(*duals))
        actual = [forward_ad.unpack_dual(o).tangent for o in outputs]
    argnums = tuple(range(len(inputs)))
    jacobians = torch.func.jacrev(lambda *a: as_tuple(function(*a)), argnums=argnums)(*inputs)
    for tangent, per_input in zip(actual, jacobians, strict=True):
        expected = sum(
            torch.tensordot(jacobian, t, dims=t.dim())
            for jacobian, t in zip(per_input, tangents, strict=True)
        )
        torch.testing.assert_close(tangent, expected)


@pytest.mark.parametrize("module", ["soft_clamp", "rms_norm", "l2_normalize"])
def test_torch_export_traces_the_function(module: str) -> None:
    function = _function(module)

    class Model(torch.nn.Module):
        def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return as_tuple(function(*args))

    inputs = _inputs(module)
    exported = torch.export.export(Model(), inputs)
    for a, b in zip(exported.module()(*inputs), as_tuple(function(*inputs)), strict=True):
        torch.testing.assert_close(a, b)
