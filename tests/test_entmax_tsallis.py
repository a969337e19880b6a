"""1.5-entmax: the generated Function against entmax's Entmax15Function.

entmax (deep-spin/entmax, activations.py) computes the threshold in
`_entmax_threshold_and_support`: a descending sort, running means of the values and of
their squares, the candidate threshold at every k, the support size as the count of
candidates at or below the sorted values, and tau gathered at that size. Its hand-written
backward is the closed form `dX = dY * sqrt(Y)`, less its weighted mean over the support.
The spec writes only the forward, with the support as a mask (examples/entmax15.yaml);
its derived backward must agree with that closed form, and with autograd of the same
formula, for every support size and along other shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from symgrad.api import load_module, load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent


def _threshold_and_support(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """entmax's `_entmax_threshold_and_support` (without its partial-sort `k`)."""
    x_srt, _ = torch.sort(x, dim=dim, descending=True)
    shape = [1] * x.dim()
    shape[dim] = -1
    rho = torch.arange(1, x.size(dim) + 1, dtype=x.dtype).view(shape)
    mean = x_srt.cumsum(dim) / rho
    mean_sq = (x_srt**2).cumsum(dim) / rho
    ss = rho * (mean_sq - mean**2)
    delta = (1 - ss) / rho
    delta_nz = torch.clamp(delta, 0)
    tau = mean - torch.sqrt(delta_nz)
    support_size = (tau <= x_srt).sum(dim).unsqueeze(dim)
    tau_star = tau.gather(dim, support_size - 1)
    return tau_star, support_size


class Entmax15Function(torch.autograd.Function):
    """entmax's Entmax15Function along the last dim, forward and backward as it writes them."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        dim = -1
        max_val, _ = x.max(dim=dim, keepdim=True)
        x = x - max_val
        x = x / 2
        tau_star, _ = _threshold_and_support(x, dim)
        y = torch.clamp(x - tau_star, min=0) ** 2
        ctx.save_for_backward(y)  # type: ignore[attr-defined]
        return y

    @staticmethod
    def backward(ctx: object, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors  # type: ignore[attr-defined]
        gppr = y.sqrt()
        dx = dy * gppr
        q = dx.sum(-1) / gppr.sum(-1)
        q = q.unsqueeze(-1)
        return dx - q * gppr


def _formula(x: torch.Tensor) -> torch.Tensor:
    """entmax's forward in torch with autograd through it: tau read by the gather."""
    z = (x - x.max(dim=-1, keepdim=True).values) / 2
    tau_star, _ = _threshold_and_support(z, -1)
    return torch.clamp(z - tau_star, min=0) ** 2


def _rows(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Rows whose supports run from one element to all: scales from 0.05 to 20 per row."""
    generator = torch.Generator().manual_seed(seed)
    rows = int(torch.tensor(shape[:-1]).prod())
    scales = torch.logspace(-1.3, 1.3, rows, dtype=torch.float64).view(*shape[:-1], 1)
    return torch.randn(shape, generator=generator, dtype=torch.float64) * scales


@pytest.fixture(scope="module")
def module() -> object:
    return load_module(load_spec(REPO_ROOT / "examples" / "entmax15.yaml"))


@pytest.mark.parametrize(("seed", "shape"), [(0, (6, 7)), (1, (6, 7)), (2, (3, 4, 9)), (3, (8, 1))])
def test_entmax15_matches_entmax_forward_and_backward(
    module: object, seed: int, shape: tuple[int, ...]
) -> None:
    x = _rows(seed, shape)
    ours, theirs, formula = (x.clone().requires_grad_() for _ in range(3))
    actual = module.entmax15(ours)  # type: ignore[attr-defined]
    expected = Entmax15Function.apply(theirs)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual.sum(-1), torch.ones(shape[:-1], dtype=torch.float64))
    cotangent = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    (grad,) = torch.autograd.grad(actual, ours, cotangent)
    (want,) = torch.autograd.grad(expected, theirs, cotangent)
    (autograd,) = torch.autograd.grad(_formula(formula), formula, cotangent)
    torch.testing.assert_close(grad, want)
    torch.testing.assert_close(grad, autograd)


def test_every_support_size_is_covered() -> None:
    """The rows of the (6, 7) cases reach supports of one element and of all seven."""
    sizes = torch.cat([(Entmax15Function.apply(_rows(s, (6, 7))) > 0).sum(-1) for s in (0, 1)])
    assert sizes.min() == 1 and sizes.max() == 7


def test_entmax15_gradcheck_and_gradgradcheck(module: object) -> None:
    x = _rows(4, (6, 7)).requires_grad_()
    function = module.Entmax15.apply  # type: ignore[attr-defined]
    assert torch.autograd.gradcheck(function, (x,))
    assert torch.autograd.gradgradcheck(function, (x,))
