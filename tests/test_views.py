"""Views, chunks and cats: the generated Functions against the originals' mathematics.

stylegan2's FusedLeakyReLUFunction (rosinality/stylegan2-pytorch, op/fused_act.py),
gpytorch's RBFCovariance (gpytorch/functions/rbf_covariance.py) and Megatron-LM's
BiasSwiGLUFunction (megatron/core/fusions/fused_bias_swiglu.py) are written here as
their forward and hand-written backward formulas; the other specs check views against
torch's autograd of the same formula, and gradcheck and gradgradcheck in float64.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parent.parent
SLOPE, SCALE = 0.2, math.sqrt(2)

# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


def _example(name: str) -> Any:
    return load_module(load_spec(REPO_ROOT / "examples" / f"{name}.yaml"))


def _leaves(*shapes: tuple[int, ...], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=generator, dtype=torch.float64).requires_grad_()
        for shape in shapes
    ]


def _stylegan(x: torch.Tensor, bias: torch.Tensor, grad: torch.Tensor) -> tuple[Any, ...]:
    """stylegan2's fused_leaky_relu forward, and its backward: the fused kernel's
    grad_input = grad * scale * (slope where out <= 0), grad_bias its sum over every dim
    but 1."""
    rest = [1] * (x.ndim - bias.ndim - 1)
    out = (
        functional.leaky_relu(x + bias.view(1, bias.shape[0], *rest), negative_slope=SLOPE) * SCALE
    )
    grad_input = grad * SCALE * torch.where(out > 0, 1.0, SLOPE)
    dims = [0, *range(2, x.ndim)]
    return out, grad_input, grad_input.sum(dims)


def test_fused_leaky_relu_matches_stylegan2s_backward() -> None:
    module = _example("fused_leaky_relu")
    x, bias = _leaves((2, 3, 4, 5), (3,))
    grad = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    out = module.fused_leaky_relu(x, bias)
    grads = torch.autograd.grad(out, (x, bias), grad)
    expected, grad_input, grad_bias = _stylegan(x.detach(), bias.detach(), grad)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grads[0], grad_input)
    torch.testing.assert_close(grads[1], grad_bias)
    assert torch.autograd.gradcheck(module.FusedLeakyReLU.apply, (x, bias), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(module.FusedLeakyReLU.apply, (x, bias))


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5)], ids=["2-D", "3-D"])
def test_fused_leaky_relu_of_2d_and_3d_inputs_views_the_bias_along_dim_1(
    shape: tuple[int, ...],
) -> None:
    sizes = [1, -1, *[1] * (len(shape) - 2)]
    module = load_module(
        spec_from_dict(
            {
                "name": "FusedLeakyReLU2",
                "inputs": {
                    "x": {"type": "tensor", "shape": list(shape)},
                    "bias": {"type": "tensor", "shape": [3]},
                },
                "outputs": {"out": f"leaky_relu(x + view(bias, {sizes}), {SLOPE}) * {SCALE!r}"},
            }
        )
    )
    x, bias = _leaves(shape, (3,))
    grad = torch.randn(shape, dtype=torch.float64)
    out = module.fused_leaky_relu_2(x, bias)
    expected, grad_input, grad_bias = _stylegan(x.detach(), bias.detach(), grad)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(torch.autograd.grad(out, (x, bias), grad), (grad_input, grad_bias))


def _rbf(x1: torch.Tensor, x2: torch.Tensor, ls: torch.Tensor, grad: torch.Tensor) -> Any:
    """gpytorch's RBFCovariance from its mathematics: K = exp(-|x1/l - x2/l|^2 / 2), and
    dK/dx1_i = -K (x1_i - x2_j) / l^2, dK/dl = K (x1_i - x2_j)^2 / l^3, per dimension."""
    diff = x1[:, None] - x2[None]  # [n, m, d]
    covar = torch.exp(-0.5 * ((diff / ls) ** 2).sum(-1))
    weighted = (grad * covar)[..., None]  # [n, m, 1]
    grad_x1 = -(weighted * diff / ls**2).sum(1)
    grad_x2 = (weighted * diff / ls**2).sum(0)
    grad_ls = (weighted * diff**2 / ls**3).sum((0, 1)).reshape(ls.shape)
    return covar, grad_x1, grad_x2, grad_ls


def test_rbf_covariance_matches_gpytorchs_formulas() -> None:
    module = _example("rbf_covariance")
    x1, x2 = _leaves((5, 3), (4, 3))
    ls = (torch.rand(1, 3, dtype=torch.float64) + 0.5).requires_grad_()
    grad = torch.randn(5, 4, dtype=torch.float64)
    covar = module.rbf_covariance(x1, x2, ls)
    expected, *grads = _rbf(x1.detach(), x2.detach(), ls.detach(), grad)
    torch.testing.assert_close(covar, expected)
    torch.testing.assert_close(torch.autograd.grad(covar, (x1, x2, ls), grad), tuple(grads))
    apply = module.RBFCovariance.apply
    assert torch.autograd.gradcheck(apply, (x1, x2, ls), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(apply, (x1, x2, ls))


def _swiglu(x: torch.Tensor, bias: torch.Tensor, grad: torch.Tensor) -> Any:
    """Megatron-LM's bias_swiglu_impl forward and bias_swiglu_back, as it writes them."""
    y_1, y_2 = torch.chunk(x + bias, 2, -1)
    out = functional.silu(y_1) * y_2
    sig = torch.sigmoid(y_1)
    grad_y = torch.cat((grad * sig * (1 + y_1 * (1 - sig)) * y_2, grad * functional.silu(y_1)), -1)
    return out, grad_y, grad_y.sum((0, 1))


def test_bias_swiglu_matches_megatrons_backward() -> None:
    module = _example("bias_swiglu")
    x, bias = _leaves((3, 4, 8), (8,))
    grad = torch.randn(3, 4, 4, dtype=torch.float64)
    out = module.bias_swiglu(x, bias)
    expected, grad_x, grad_bias = _swiglu(x.detach(), bias.detach(), grad)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(torch.autograd.grad(out, (x, bias), grad), (grad_x, grad_bias))
    assert torch.autograd.gradcheck(module.BiasSwiGLU.apply, (x, bias), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(module.BiasSwiGLU.apply, (x, bias))


def test_the_chunks_adjoint_is_one_cat_of_the_pieces() -> None:
    source = generate(load_spec(REPO_ROOT / "examples" / "bias_swiglu.yaml"))["bias_swiglu.py"]
    backward = source[source.index("def backward") : source.index("def jvp")]
    assert backward.count("torch.cat(") == 1
    assert "new_zeros" not in backward


VIEWS = {
    "name": "Views",
    "inputs": {
        "a": {"type": "tensor", "shape": [2, 6]},
        "b": {"type": "tensor", "shape": [2, 3]},
        "c": {"type": "tensor", "shape": [3]},
    },
    # One piece of a chunk (zeros for the others), a cat of three, a reshape with -1.
    "where": {"m": "chunk(a * 2, 2, dim=1)[1]"},
    "outputs": {
        "y": "cat([sin(a), b * m, unsqueeze(c, 0) + b], dim=1)",
        "z": "sum(reshape(exp(a), [-1, 4]), dim=0)",
    },
}


def _views_reference(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[Any, ...]:
    m = torch.chunk(a * 2, 2, dim=1)[1]
    y = torch.cat([torch.sin(a), b * m, c.unsqueeze(0) + b], 1)
    return y, torch.exp(a).reshape(-1, 4).sum(0)


def test_views_chunk_pieces_and_cats_match_autograd() -> None:
    module = load_module(spec_from_dict(VIEWS))
    a, b, c = _leaves((2, 6), (2, 3), (3,))
    ours, theirs = module.Views.apply(a, b, c), _views_reference(a, b, c)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference)
    grads = [torch.randn_like(t) for t in theirs]
    expected = torch.autograd.grad(theirs, (a, b, c), grads)
    torch.testing.assert_close(torch.autograd.grad(ours, (a, b, c), grads), expected)
    assert torch.autograd.gradcheck(module.Views.apply, (a, b, c), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(module.Views.apply, (a, b, c))


def test_views_batch_under_vmap() -> None:
    module = _example("bias_swiglu")
    x, bias = _leaves((5, 3, 4, 8), (8,))
    batched = torch.func.vmap(module.bias_swiglu, in_dims=(0, None))(x, bias)
    y_1, y_2 = torch.chunk(x + bias, 2, -1)
    torch.testing.assert_close(batched, functional.silu(y_1) * y_2)


def _spec(output: str, shape: list[int] | None = None) -> dict[str, Any]:
    return {
        "name": "F",
        "inputs": {"x": {"type": "tensor", "shape": shape or [2, 6]}},
        "outputs": {"y": output},
    }


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("reshape(x, [5, -1])", "reshape(): cannot hold 12 elements in shape [5, -1]"),
        ("view(x, [3, 5])", "reshape(): 12 elements cannot take shape [3, 5]"),
        ("reshape(x, [0, 2])", "reshape() sizes must be positive, with at most one -1"),
        ("chunk(x, 4, dim=1)[0]", "chunk(): 4 chunks do not divide size 6 of dim 1"),
        ("chunk(x, 2, 1)[2]", "chunk() piece 2 is out of range for 2 chunks"),
        ("chunk(x, 2, 1)", "chunk() gives several pieces: take one"),
        ("exp(x)[0]", "indexing is only for a piece of chunk(x, n, dim)[i]"),
        ("unsqueeze(x, 3)", "unsqueeze(): dim 3 is out of range for 3 dimensions"),
        ("cat([x, unsqueeze(x, 0)], 0)", "cat(): pieces of shapes [[2, 6], [1, 2, 6]] have"),
        ("cat([x, reshape(x, [6, 2])], 0)", "cat(): pieces of shapes [[2, 6], [6, 2]] differ"),
        ("cat(x, 0)", "cat() takes its pieces as a list"),
        ("reshape(x)", "reshape() needs shape"),
    ],
)
def test_views_that_cannot_fit_are_refused_where_written(output: str, message: str) -> None:
    with pytest.raises(SpecError, match=r"^<dict>:") as caught:
        spec_from_dict(_spec(output))
    assert message in str(caught.value)


def test_a_view_of_a_number_is_refused() -> None:
    data = {
        "name": "F",
        "inputs": {"x": "tensor", "k": "float"},
        "outputs": {"y": "x + unsqueeze(k, 0)"},
    }
    with pytest.raises(SpecError, match="unsqueeze\\(\\) needs a value that depends on a tensor"):
        spec_from_dict(data)


# Views in a guarded `where` branch (Note [Untaken branches] in symgrad.ad.guards): the
# guard must not broadcast a view's argument to the condition's shape, nor read the
# condition at positions the view moved. name -> (input shapes, output, torch's formula).
GUARDED_VIEWS: dict[str, tuple[list[list[int]], str, Any]] = {
    "an unsqueezed 0-d value under a condition of shape [1]": (
        [[]],
        "where(reshape(x0, [1]) > 0, unsqueeze(log(1 + x0**2), 0), amin(x0))",
        lambda x0: torch.where(
            x0.reshape(1) > 0, torch.log(1 + x0**2).unsqueeze(0), torch.amin(x0)
        ),
    ),
    "a reshape of rank 3 beside values of rank 1": (
        [[1], [3]],
        "where(x1 > 0, exp(x0), min(x1, reshape(log(1 + x0**2), [1, -1, 1])))",
        lambda x0, x1: torch.where(
            x1 > 0, torch.exp(x0), torch.minimum(x1, torch.log(1 + x0**2).reshape(1, -1, 1))
        ),
    ),
    "a cat along a dim the condition broadcasts": (
        [[1], [1, 2]],
        "where(x1 > 0, exp(x0), cat([log(1 + x0**2), x0**3], 0))",
        lambda x0, x1: torch.where(
            x1 > 0, torch.exp(x0), torch.cat([torch.log(1 + x0**2), x0**3], 0)
        ),
    ),
    "a cat of a softmax under a pole": (
        [[1], [2]],
        "where(x1 > 0, x1, sqrt(cat([softmax(x0, dim=-1), x0], 0)**2 + 0.5))",
        lambda x0, x1: torch.where(
            x1 > 0, x1, torch.sqrt(torch.cat([torch.softmax(x0, -1), x0], 0) ** 2 + 0.5)
        ),
    ),
    # The condition at position 1 is x0[1]'s, the cat's value there is x0[0]'s.
    "a cat of chunk pieces in other positions": (
        [[3]],
        "where(x0 > 0, cat([chunk(sqrt(x0 + 2), 3, 0)[2], chunk(x0, 3, 0)[0],"
        " chunk(x0, 3, 0)[1]], 0), 0)",
        lambda x0: torch.where(x0 > 0, torch.cat([torch.sqrt(x0 + 2)[2:], x0[:2]]), 0),
    ),
}


@pytest.mark.parametrize("name", GUARDED_VIEWS)
def test_views_in_guarded_branches_match_autograd(name: str) -> None:
    shapes, output, formula = GUARDED_VIEWS[name]
    inputs = {f"x{n}": {"type": "tensor", "shape": shape} for n, shape in enumerate(shapes)}
    module = load_module(spec_from_dict({"name": "F", "inputs": inputs, "outputs": {"y": output}}))
    leaves = _leaves(*map(tuple, shapes), seed=3)
    with torch.no_grad():  # both signs in every condition, without a value at 0
        leaves[0].copy_(torch.tensor([0.8, -1.2, 0.5][: leaves[0].numel()]).reshape(shapes[0]))
    ours, theirs = module.F.apply(*leaves), formula(*leaves)
    torch.testing.assert_close(ours, theirs)
    grad = torch.randn(theirs.shape, dtype=torch.float64)
    # A condition's input gets no gradient from torch, and zeros or none from ours.
    for leaf, mine, want in zip(
        leaves,
        torch.autograd.grad(ours, leaves, grad, allow_unused=True),
        torch.autograd.grad(theirs, leaves, grad, allow_unused=True),
        strict=True,
    ):
        zeros = torch.zeros_like(leaf)
        torch.testing.assert_close(zeros if mine is None else mine, zeros if want is None else want)
