"""pytorch-vqvae's vector quantisation and straight-through estimator, as a spec.

The original (functions.py in ritheshkumar95/pytorch-vqvae) is written out in plain
torch below: `VectorQuantization` picks the nearest codebook row by torch.min over the
addmm distances, `VectorQuantizationStraightThrough` selects those rows, passes the
incoming gradient straight to the inputs and index_adds it into the codebook. The
generated Function must give the same indices, codes and gradients, ties included.
"""

from __future__ import annotations

from pathlib import Path

import torch

from symgrad.api import derive, generate, load_module, load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent
SPEC = REPO_ROOT / "examples" / "vq_straight_through.yaml"


def _vector_quantization(inputs: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """VectorQuantization.forward: the index of the nearest codebook row to each row."""
    with torch.no_grad():
        codebook_sqr = torch.sum(codebook**2, dim=1)
        inputs_sqr = torch.sum(inputs**2, dim=1, keepdim=True)
        distances = torch.addmm(
            codebook_sqr + inputs_sqr, inputs, codebook.t(), alpha=-2.0, beta=1.0
        )
        _, indices = torch.min(distances, dim=1)
        return indices


class _StraightThrough(torch.autograd.Function):
    """VectorQuantizationStraightThrough, as the original writes it."""

    @staticmethod
    def forward(ctx, inputs, codebook):  # type: ignore[no-untyped-def, override]
        indices = _vector_quantization(inputs, codebook)
        ctx.save_for_backward(indices, codebook)
        return torch.index_select(codebook, dim=0, index=indices)

    @staticmethod
    def backward(ctx, grad_output):  # type: ignore[no-untyped-def, override]
        indices, codebook = ctx.saved_tensors
        grad_codebook = torch.zeros_like(codebook)
        grad_codebook.index_add_(0, indices, grad_output)
        return grad_output.clone(), grad_codebook


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Six rows and five codes in float64; two rows equally near two codes (a tie)."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    codebook = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    codebook[3] = codebook[1]
    inputs[2] = codebook[1] + 0.25
    inputs[4] = codebook[0]
    return inputs.requires_grad_(), codebook.requires_grad_()


def test_codes_and_gradients_match_pytorch_vqvae() -> None:
    module = load_module(load_spec(SPEC))
    inputs, codebook = _inputs(0)
    codes = module.vq_straight_through(inputs, codebook)
    expected = _StraightThrough.apply(inputs, codebook)
    torch.testing.assert_close(codes, expected)
    grad_output = torch.randn(6, 4, dtype=torch.float64)
    grads = torch.autograd.grad(codes, (inputs, codebook), grad_output)
    wants = torch.autograd.grad(expected, (inputs, codebook), grad_output)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)


def test_indices_are_vector_quantization_and_saved_as_int64() -> None:
    """The forward's indices are VectorQuantization's (the first among tied codes), and
    they are all the backward keeps: no distance, no float."""
    module = load_module(load_spec(SPEC))
    inputs, codebook = _inputs(1)
    _, indices = module.VQStraightThrough.forward(inputs, codebook)
    assert indices.dtype == torch.int64
    torch.testing.assert_close(indices, _vector_quantization(inputs, codebook))
    assert indices[2] == 1  # codes 1 and 3 tie: the first
    derived = derive(load_spec(SPEC))
    assert [o.name for o in derived.residuals + derived.saved_values] == ["indices"]
    source = generate(load_spec(SPEC))["vq_straight_through.py"]
    assert "ctx.save_for_backward(indices)" in source
