"""Scans and sort: the generated Functions against the originals' mathematics.

Sparsemax is entmax's `SparsemaxFunction` (deep-spin/entmax, activations.py): its
forward sorts, takes a running sum and reads the threshold by a gather at the support
size; its hand-written backward is the closed form, the gradient less its mean over the
support, on the support. The spec writes only the forward; its derived backward must
agree with that closed form, and with autograd of the same formula. The other specs
check cumsum, flip, sort and position along other dims against torch's autograd, in
reverse and forward mode and to second order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parent.parent


def _entmax_sparsemax(z: torch.Tensor) -> torch.Tensor:
    """entmax's SparsemaxFunction along the last dim, forward and backward as it writes them."""

    class SparsemaxFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            x = x - x.max(dim=-1, keepdim=True).values
            x_srt = torch.sort(x, descending=True, dim=-1).values
            x_cumsum = x_srt.cumsum(-1) - 1
            rhos = torch.arange(1, x.size(-1) + 1, dtype=x.dtype)
            support_size = (rhos * x_srt > x_cumsum).sum(dim=-1, keepdim=True)
            tau = x_cumsum.gather(-1, support_size - 1) / support_size.to(x.dtype)
            output = torch.clamp(x - tau, min=0)
            ctx.save_for_backward(support_size, output)  # type: ignore[attr-defined]
            return output

        @staticmethod
        def backward(ctx: object, grad_output: torch.Tensor) -> torch.Tensor:
            support_size, output = ctx.saved_tensors  # type: ignore[attr-defined]
            grad_input = grad_output.clone()
            grad_input[output == 0] = 0
            v_hat = grad_input.sum(dim=-1, keepdim=True) / support_size.to(output.dtype)
            return torch.where(output != 0, grad_input - v_hat, grad_input)

    result: torch.Tensor = SparsemaxFunction.apply(z)
    return result


def _sparsemax_formula(z: torch.Tensor) -> torch.Tensor:
    """The spec's formula in torch, for autograd: the support as a mask, no gather."""
    zs = torch.sort(z, dim=-1, descending=True).values
    k = torch.arange(1, z.size(-1) + 1, dtype=z.dtype)
    support = torch.where(1 + k * zs > zs.cumsum(-1), 1.0, 0.0).to(z.dtype)
    tau = ((support * zs).sum(-1, keepdim=True) - 1) / support.sum(-1, keepdim=True)
    return torch.relu(z - tau)


def _rows(seed: int) -> torch.Tensor:
    """Rows whose supports run from one element to all: scales from 0.05 to 20."""
    generator = torch.Generator().manual_seed(seed)
    scales = torch.logspace(-1.3, 1.3, 6, dtype=torch.float64).unsqueeze(-1)
    return torch.randn(6, 7, generator=generator, dtype=torch.float64) * scales


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparsemax_matches_entmax_forward_and_backward(seed: int) -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "sparsemax.yaml"))
    z = _rows(seed)
    ours, theirs, formula = (z.clone().requires_grad_() for _ in range(3))
    actual = module.sparsemax(ours)
    expected = _entmax_sparsemax(theirs)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual.sum(-1), torch.ones(6, dtype=torch.float64))
    supports = (expected > 0).sum(-1)
    assert supports.min() == 1 and supports.max() == 7  # every kind of row is covered
    cotangent = torch.randn(
        z.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9)
    )
    (grad,) = torch.autograd.grad(actual, ours, cotangent)
    (want,) = torch.autograd.grad(expected, theirs, cotangent)
    (autograd,) = torch.autograd.grad(_sparsemax_formula(formula), formula, cotangent)
    torch.testing.assert_close(grad, want)
    torch.testing.assert_close(grad, autograd)


def test_sparsemax_gradcheck_and_gradgradcheck() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "sparsemax.yaml"))
    z = _rows(4).requires_grad_()
    assert torch.autograd.gradcheck(module.Sparsemax.apply, (z,))
    assert torch.autograd.gradgradcheck(module.Sparsemax.apply, (z,))


# Each construct along a dim other than the last, and descending and ascending sorts,
# inside a formula whose other parts are smooth; x has distinct values, so the sorts'
# orders are the same under gradcheck's small steps.
ALONG_DIMS = {
    "name": "AlongDims",
    "inputs": {"x": {"type": "tensor", "shape": [3, 4, 5]}, "w": {"type": "tensor", "shape": [5]}},
    "where": {"s": "sort(x * w, dim=1)", "c": "cumsum(exp(s), 0)"},
    "outputs": {
        "y": "flip(c, 2) * sin(x) + position(x, 1) * sort(x, 2, descending=True)",
        "total": "sum(cumsum(flip(x * x, 1), dim=-1))",
    },
}


def _along_dims(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.sort(x * w, dim=1).values
    c = torch.cumsum(torch.exp(s), 0)
    position = torch.arange(4, dtype=x.dtype).view(1, 4, 1)
    y = torch.flip(c, (2,)) * torch.sin(x) + position * torch.sort(x, 2, descending=True).values
    return y, torch.cumsum(torch.flip(x * x, (1,)), -1).sum()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, 5, generator=generator, dtype=torch.float64).requires_grad_()
    w = torch.rand(5, generator=generator, dtype=torch.float64).add(0.5).requires_grad_()
    return x, w


def test_scans_along_other_dims_match_autograd() -> None:
    module = load_module(spec_from_dict(ALONG_DIMS))
    x, w = _inputs()
    actual = module.along_dims(x, w)
    expected = _along_dims(x, w)
    cotangents = [torch.randn_like(t) for t in expected]
    for value, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(value, want)
    grads = torch.autograd.grad(actual, (x, w), cotangents)
    wants = torch.autograd.grad(expected, (x, w), cotangents)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.AlongDims.apply, (x, w))
    assert torch.autograd.gradgradcheck(module.AlongDims.apply, (x, w))


# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_scans_jvp_matches_autograd() -> None:
    module = load_module(spec_from_dict(ALONG_DIMS))
    x, w = (t.detach() for t in _inputs())
    tangents = (torch.randn_like(x), torch.randn_like(w))
    _, actual = torch.func.jvp(module.along_dims, (x, w), tangents)
    _, expected = torch.func.jvp(_along_dims, (x, w), tangents)
    for value, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(value, want)


def test_the_adjoints_are_torch_kernels_without_loops() -> None:
    """cumsum's adjoint is a reversed cumsum by flips; sort's a scatter at argsort."""
    source = generate(spec_from_dict(ALONG_DIMS))["along_dims.py"]
    function = source[source.index("def backward(") : source.index("def jvp(")]
    compact = "".join(function.split())  # black breaks the calls over lines
    assert "torch.flip(torch.cumsum(torch.flip(" in compact
    assert ".scatter_add(1,torch.argsort(w*x,dim=1,descending=False)," in compact
    assert not any(line.lstrip().startswith("for ") for line in function.splitlines())


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("cumsum(x)", "cumsum() needs a dim, e.g. cumsum(x, dim=-1)"),
        ("flip(x, dims=0)", "flip() has no argument 'dims' (did you mean 'dim'?)"),
        ("sort(x, 0, descending=1)", "sort() descending must be True or False"),
        ("sort(x, 0, True, 1)", "sort() takes an expression, then dim and descending, got 4"),
        ("position(x, dim=0.5)", "position() dim must be an integer or a list of integers"),
    ],
)
def test_misuses_are_refused_with_located_errors(expression: str, message: str) -> None:
    data = {"name": "F", "inputs": {"x": "tensor"}, "outputs": {"y": expression}}
    with pytest.raises(SpecError, match=r"outputs\.y: ") as caught:
        spec_from_dict(data)
    assert message in str(caught.value)


def test_sort_of_a_number_is_refused() -> None:
    data = {
        "name": "F",
        "inputs": {"x": "tensor", "k": "float"},
        "outputs": {"y": "x * cumsum(k, 0)"},
    }
    with pytest.raises(Exception, match=r"cumsum\(\) needs an argument that depends on a tensor"):
        generate(spec_from_dict(data))


# A scan inside a branch of `where` whose condition has the scanned value's shape: the
# guard of the untaken branch must not replace the scan's inputs (the scan moves values
# to positions where the condition differs), only its value.
GUARDED = {
    "x0": {"type": "tensor", "shape": [1, 2, 3]},
    "x1": {"type": "tensor", "shape": []},
    "x2": {"type": "tensor", "shape": [3]},
}


@pytest.mark.parametrize(
    ("expression", "reference"),
    [
        (
            "where(x0 > 0.24, flip(x2 / (1 + x1**2), 0), 0)",
            lambda x0, x1, x2: torch.where(x0 > 0.24, torch.flip(x2 / (1 + x1**2), (0,)), 0.0),
        ),
        (
            "where(x0 > 0.24, x1, sort(x0 / (1 + x1**2), 1, descending=True))",
            lambda x0, x1, x2: torch.where(
                x0 > 0.24, x1, torch.sort(x0 / (1 + x1**2), 1, descending=True).values
            ),
        ),
    ],
)
def test_a_scan_in_a_guarded_branch_matches_autograd(expression: str, reference: Any) -> None:
    module = load_module(
        spec_from_dict({"name": "G", "inputs": GUARDED, "outputs": {"y": expression}})
    )
    generator = torch.Generator().manual_seed(1)
    values = [
        torch.randn(s["shape"], generator=generator, dtype=torch.float64) for s in GUARDED.values()
    ]
    ours = [v.clone().requires_grad_() for v in values]
    theirs = [v.clone().requires_grad_() for v in values]
    actual, expected = module.g(*ours), reference(*theirs)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    grads = torch.autograd.grad(actual, ours, cotangent, allow_unused=True)
    wants = torch.autograd.grad(expected, theirs, cotangent, allow_unused=True)
    for grad, want in zip(grads, wants, strict=True):
        if want is not None:
            torch.testing.assert_close(grad, want)
