"""apex's ScaledUpperTriangMaskedSoftmax as a spec (examples/scaled_causal_softmax.yaml).

The original's forward is the softmax of `scale * x` with every key after the query
(j > i) at -inf; its backward is the softmax backward scaled by `scale`:
`grad_x = scale * y * (g - sum(g * y, -1))`. The spec masks with `position` comparisons
along the last two dims; both directions must match the original's mathematics.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import symgrad

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "scaled_causal_softmax.yaml"


def _apex_forward(x: torch.Tensor, scale: float) -> torch.Tensor:
    sq, sk = x.shape[-2:]
    upper = torch.ones(sq, sk, dtype=torch.bool).triu(diagonal=1)
    return torch.softmax((scale * x).masked_fill(upper, float("-inf")), dim=-1)


def _apex_backward(y: torch.Tensor, grad: torch.Tensor, scale: float) -> torch.Tensor:
    return scale * y * (grad - (grad * y).sum(-1, keepdim=True))


@pytest.mark.parametrize("scale", [0.125, 1.0, 3.0])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 3, 6, 6)])
def test_matches_apex(shape: tuple[int, ...], scale: float) -> None:
    function = symgrad.load(EXAMPLE).apply
    generator = torch.Generator().manual_seed(len(shape))
    x = 4 * torch.randn(shape, generator=generator, dtype=torch.float64)
    x.requires_grad_()
    y = function(x, scale)
    want = _apex_forward(x.detach(), scale)
    torch.testing.assert_close(y, want, rtol=1e-12, atol=0)
    assert (y.detach().triu(diagonal=1) == 0).all()  # masked keys get exactly 0
    grad = torch.randn(shape, generator=generator, dtype=torch.float64)
    (grad_x,) = torch.autograd.grad(y, x, grad)
    torch.testing.assert_close(grad_x, _apex_backward(want, grad, scale))
    assert torch.autograd.gradgradcheck(lambda x: function(x, scale), (x,))


def test_the_mask_is_along_the_last_two_dims_of_any_rank() -> None:
    """A 2-D input is one attention matrix: row i sees keys 0..i."""
    function = symgrad.load(EXAMPLE).apply
    y = function(torch.zeros(3, 3, dtype=torch.float64), 1.0)
    want = torch.tensor([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])
    torch.testing.assert_close(y, want.double())
