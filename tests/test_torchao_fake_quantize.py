"""torchao's fake quantiser (examples/fake_quantize.yaml) against the original's mathematics.

torchao/quantization/qat/utils.py `_GenericFakeQuantize` calls
`fake_quantize_affine_cachemask`: q = round(x / scale) + zero_point, the mask
quant_min <= q <= quant_max, then (clamp(q) - zero_point) * scale; it saves the mask alone
and its backward is gy * mask. The example asks for `save: memory`, which saves the same
bool mask (Note [Saved masks] in symgrad.ad.masks).
"""

from __future__ import annotations

from typing import Any

import torch

from symgrad import load_module, load_spec
from tests.conftest import REPO_ROOT

SCALE, ZERO, LOW, HIGH = 0.05, 3.0, -128.0, 127.0


class TorchaoFakeQuantize(torch.autograd.Function):
    """The original, per tensor: forward with the mask, backward gy * mask."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        q = torch.round(x / SCALE) + ZERO
        mask = torch.logical_and(q >= LOW, q <= HIGH)
        ctx.save_for_backward(mask)
        return (torch.clamp(q, LOW, HIGH) - ZERO) * SCALE

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> torch.Tensor:
        (mask,) = ctx.saved_tensors
        return gy * mask


def saved(function: Any, x: torch.Tensor) -> list[torch.Tensor]:
    """The tensors one forward of `function` saves for backward."""
    packed: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        function(x)
    return packed


def test_fake_quantize_matches_torchao_and_saves_its_mask() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "fake_quantize.yaml"))
    generator = torch.Generator().manual_seed(0)
    # Past the range on both sides, so that the mask holds both values.
    x = (torch.randn(64, 32, generator=generator) * 5).requires_grad_()
    gy = torch.randn(64, 32, generator=generator)
    ours = module.fake_quantize(x)
    theirs = TorchaoFakeQuantize.apply(x)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    (our_grad,) = torch.autograd.grad(ours, x, gy)
    (their_grad,) = torch.autograd.grad(theirs, x, gy)
    torch.testing.assert_close(our_grad, their_grad, rtol=0, atol=0)
    mine, original = saved(module.fake_quantize, x), saved(TorchaoFakeQuantize.apply, x)
    assert [(t.dtype, t.shape) for t in mine] == [(t.dtype, t.shape) for t in original]
    assert [t.dtype for t in mine] == [torch.bool]
