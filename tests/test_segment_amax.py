"""segment_amax(x, index, dim, size): the maximum of each segment, as torch computes it.

torch's `scatter_reduce(dim, index, x, "amax", include_self=False)` on zeros, the index
expanded, is the reference for values and gradients:
an empty segment is zero with no gradient, and tied maxima share their segment's
gradient evenly (Note [Segment maxima]). gradcheck and gradgradcheck run in float64
away from ties; the jvp is checked against the reverse mode taken twice.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from symgrad.api import load_module, spec_from_dict
from symgrad.errors import SpecError


def _spec(output: str, shape: tuple[int, int] = (6, 3), **inputs: object) -> Any:
    """A spec of one output over x of `shape` and a 1-d index of one position per row."""
    declared = {
        "x": {"type": "tensor", "shape": list(shape)},
        "index": {"type": "index", "shape": [shape[0]]},
        **inputs,
    }
    return spec_from_dict({"name": "SegmentMax", "inputs": declared, "outputs": {"y": output}})


def _torch_amax(x: torch.Tensor, index: torch.Tensor, size: int, dim: int = 0) -> torch.Tensor:
    """torch's segment maximum, the zeros left out: what the spec means."""
    shape = list(x.shape)
    shape[dim] = size
    dim %= x.dim()
    expanded = index.view([-1 if n == dim else 1 for n in range(x.dim())]).expand_as(x)
    return x.new_zeros(shape).scatter_reduce(dim, expanded, x, "amax", include_self=False)


# Segment 3 of 5 is empty; segments 0 and 1 hold two and three rows.
INDEX = torch.tensor([1, 0, 2, 1, 0, 1])


def test_values_and_gradients_match_torch_with_ties_and_an_empty_segment() -> None:
    module = load_module(_spec("segment_amax(x * 2, index, 0, 5)"))
    x = torch.tensor(
        [
            [1.0, -2.0, 3.0],
            [4.0, 5.0, -1.0],
            [0.5, -0.5, 2.0],
            [1.0, 7.0, 3.0],
            [4.0, 5.0, -3.0],
            [-1.0, 7.0, 3.0],
        ],
        dtype=torch.float64,
        requires_grad=True,
    )
    actual, expected = module.segment_max(x, INDEX), _torch_amax(x * 2, INDEX, 5)
    torch.testing.assert_close(actual, expected)
    assert not actual[3:].any()  # the empty segments keep their zero
    cotangent = torch.arange(15, dtype=torch.float64).reshape(5, 3) + 1
    (grad,) = torch.autograd.grad(actual, x, cotangent)
    (want,) = torch.autograd.grad(expected, x, cotangent)
    torch.testing.assert_close(grad, want)
    # Rows 0, 3 and 5 tie at 3 in column 2 of segment 1: each gets a third of 2 * 6.
    torch.testing.assert_close(grad[[0, 3, 5], 2], torch.full((3,), 4.0, dtype=torch.float64))


@pytest.mark.parametrize(
    "output",
    [
        "segment_amax(sin(x) * x, index, 0, 4) ** 2",
        "segment_amax(exp(x), index, dim=0, size=n) * segment_sum(x, index, 0, n)",
        "sum(segment_amax(x**3, index, -2, 4), dim=1)",
    ],
)
# torch.func.jvp loads torch's jvp decompositions through torch.jit.script once.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_segment_amax_against_torch(output: str) -> None:
    module = load_module(_spec(output, n={"type": "int", "default": 4}))
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 2, 0, 1, 2, 0])  # segment 3 empty
    args = (x, index, 4) if "n)" in output else (x, index)
    reference = {
        "segment_amax(sin(x) * x, index, 0, 4) ** 2": lambda: (
            _torch_amax(torch.sin(x) * x, index, 4) ** 2
        ),
        "segment_amax(exp(x), index, dim=0, size=n) * segment_sum(x, index, 0, n)": lambda: (
            _torch_amax(torch.exp(x), index, 4) * x.new_zeros(4, 3).index_add(0, index, x)
        ),
        "sum(segment_amax(x**3, index, -2, 4), dim=1)": lambda: (
            _torch_amax(x**3, index, 4, dim=-2).sum(1)
        ),
    }[output]()
    actual = module.segment_max(*args)
    torch.testing.assert_close(actual, reference)
    cotangent = torch.randn(reference.shape, generator=generator, dtype=torch.float64)
    (grad,) = torch.autograd.grad(actual, x, cotangent, retain_graph=True)
    (want,) = torch.autograd.grad(reference, x, cotangent)
    torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.segment_max, args)
    assert torch.autograd.gradgradcheck(module.segment_max, args)
    tangent = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    _, jvp = torch.func.jvp(lambda v: module.segment_max(v, *args[1:]), (x.detach(),), (tangent,))
    # The reverse mode twice (J^T u, then d<J^T u, t>/du) gives the same J t.
    probe = torch.zeros_like(actual, requires_grad=True)
    (pulled,) = torch.autograd.grad(actual, x, probe, create_graph=True)
    (wanted,) = torch.autograd.grad(pulled, probe, tangent)
    torch.testing.assert_close(jvp, wanted)
    assert jvp.isfinite().all()


def test_the_second_order_is_finite_beside_an_empty_segment() -> None:
    """The tie count is read at slices, so d(grad_x)/d(grad_y) is no 0 / 0 at segment 3."""
    module = load_module(_spec("segment_amax(x, index, 0, 5)"))
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    grad_y = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    (grad_x,) = torch.autograd.grad(module.segment_max(x, INDEX), x, grad_y, create_graph=True)
    (second,) = torch.autograd.grad(grad_x.sum(), grad_y)
    assert second.isfinite().all()
    assert not second[3:].any()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("segment_amax(x, index, 1, 4)", "segment_amax() index 'index' must have shape [3]"),
        ("segment_amax(x, index, 0, 0)", "segment_amax() size must be a positive integer"),
        ("segment_amax(x, index, 2, 4)", "segment_amax() dim 2 is out of range"),
        ("segment_amax(x, x, 0, 4)", "the index must be an input of type: index"),
        ("segment_amax(x, index, 0)", "segment_amax() needs size"),
    ],
)
def test_segment_amax_misuses_are_refused(output: str, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        _spec(output)


def test_a_maximum_of_zero_shares_its_gradient_among_the_slices_only() -> None:
    """torch's scatter_reduce backward counts the left-out zeros as one more tie where a
    segment's maximum is 0 (grad / 3 for two tied slices); amax's rule gives grad / 2."""
    module = load_module(_spec("segment_amax(x, index, 0, 2)", shape=(3, 1)))
    x = torch.tensor([[0.0], [0.0], [-1.0]], dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 0, 1])
    (grad,) = torch.autograd.grad(module.segment_max(x, index).sum(), x)
    (want,) = torch.autograd.grad(x[:2].amax(0).sum() + x[2:].amax(0).sum(), x)
    torch.testing.assert_close(grad, want)
    (torchs,) = torch.autograd.grad(_torch_amax(x, index, 2).sum(), x)
    torch.testing.assert_close(torchs[:2], torch.full((2, 1), 1 / 3, dtype=torch.float64))
