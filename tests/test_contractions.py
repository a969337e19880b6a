"""Contractions (einsum, matmul): the generated Functions against the originals' mathematics.

pytorch-vqvae's VectorQuantization computes its distances with addmm; gpytorch's
RBFCovariance writes its lengthscale gradient by hand. Both become specs whose
contraction is one einsum; their values and gradients are checked against the
originals, the rest against torch's autograd of the same formula, with gradcheck and
gradgradcheck in float64, jvp and vmap.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError
from symgrad.language import contractions
from symgrad.present.show import describe

REPO_ROOT = Path(__file__).resolve().parent.parent


def _inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=generator, dtype=torch.float64).requires_grad_()
        for shape in shapes
    ]


def _spec(expr: str, **shapes: list[int]) -> Any:
    inputs = {name: {"type": "tensor", "shape": shape} for name, shape in shapes.items()}
    return spec_from_dict({"name": "Contraction", "inputs": inputs, "outputs": {"y": expr}})


def _check_against_autograd(module: Any, reference: Any, inputs: list[torch.Tensor]) -> None:
    """Values, gradients, gradcheck and gradgradcheck against autograd of `reference`."""
    actual, expected = module.contraction(*inputs), reference(*inputs)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn_like(expected)
    grads = torch.autograd.grad(actual, inputs, cotangent)
    wants = torch.autograd.grad(expected, inputs, cotangent)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.contraction, tuple(inputs))
    assert torch.autograd.gradgradcheck(module.contraction, tuple(inputs))


def _vqvae_distances(inputs: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """pytorch-vqvae's VectorQuantization distances, as its forward computes them."""
    codebook_sqr = torch.sum(codebook**2, dim=1)
    inputs_sqr = torch.sum(inputs**2, dim=1, keepdim=True)
    return torch.addmm(codebook_sqr + inputs_sqr, inputs, codebook.t(), alpha=-2.0, beta=1.0)


def test_vq_distances_match_vqvae_and_autograd_of_it() -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "vq_distances.yaml"))
    x, codebook = _inputs((6, 4), (5, 4))
    actual = module.VQDistances.apply(x, codebook)
    expected = _vqvae_distances(x, codebook)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn_like(expected)
    grads = torch.autograd.grad(actual, (x, codebook), cotangent)
    wants = torch.autograd.grad(expected, (x, codebook), cotangent)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.VQDistances.apply, (x, codebook))
    assert torch.autograd.gradgradcheck(module.VQDistances.apply, (x, codebook))


def test_vq_distances_contract_and_never_build_an_outer_product() -> None:
    """Forward, backward and jvp each contract with einsum; nothing [N, K, D] is made."""
    source = generate(load_spec(REPO_ROOT / "examples" / "vq_distances.yaml"))["vq_distances.py"]
    function = source[source.index("class VQDistances(") : source.index("# Function.apply binds")]
    assert function.count('torch.einsum("nd,kd->nk", ') == 3  # forward, two jvp terms
    assert 'torch.einsum("nk,kd->nd", ' in function  # grad x = g @ codebook
    assert 'torch.einsum("nk,nd->kd", ' in function  # grad codebook = g^T @ x
    assert "[:, None" not in function and "unsqueeze(2)" not in function


# gpytorch's RBFCovariance: |x1|^2 + |x2|^2 - 2 x1 x2^T over lengthscale^2, then exp.
RBF = {
    "name": "RBFCovariance",
    "inputs": {
        "x1": {"type": "tensor", "shape": [5, 3]},
        "x2": {"type": "tensor", "shape": [4, 3]},
        "lengthscale": {"type": "tensor", "shape": [1]},
    },
    "where": {
        "d2": "sum(x1**2, dim=1, keepdim=True) + sum(x2**2, dim=1)"
        ' - 2 * einsum("nd,md->nm", x1, x2)',
    },
    "outputs": {"covar": "exp(-0.5 * d2 / lengthscale**2)"},
}


def _gpytorch_rbf(x1: torch.Tensor, x2: torch.Tensor, lengthscale: torch.Tensor) -> Any:
    """RBFCovariance's forward and its hand-written lengthscale gradient, as gpytorch has them."""
    x1_, x2_ = x1.div(lengthscale), x2.div(lengthscale)
    unitless = (x1_**2).sum(1, keepdim=True) + (x2_**2).sum(1) - 2 * x1_ @ x2_.T
    covar = unitless.div(-2.0).exp()
    d_output_d_input = unitless.mul(covar).div(lengthscale)
    return covar, d_output_d_input


def test_rbf_covariance_matches_gpytorchs_backward() -> None:
    module = load_module(spec_from_dict(RBF))
    x1, x2 = _inputs((5, 3), (4, 3))
    lengthscale = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    actual = module.rbf_covariance(x1, x2, lengthscale)
    covar, d_output_d_input = _gpytorch_rbf(x1.detach(), x2.detach(), lengthscale.detach())
    torch.testing.assert_close(actual, covar)
    grad = torch.randn_like(covar)
    (ours,) = torch.autograd.grad(actual, lengthscale, grad)
    # gpytorch returns grad * d_output_d_input; autograd sums it to lengthscale's shape.
    torch.testing.assert_close(ours, (grad * d_output_d_input).sum().reshape(1))
    inputs = (x1, x2, lengthscale)
    assert torch.autograd.gradcheck(module.RBFCovariance.apply, inputs)
    assert torch.autograd.gradgradcheck(module.RBFCovariance.apply, inputs)


@pytest.mark.parametrize(
    ("expr", "shapes", "reference"),
    [
        ("matmul(a, b)", ([3, 4], [4, 2]), torch.matmul),
        ('einsum("ij,kj->ik", a, b)', ([3, 4], [2, 4]), lambda a, b: a @ b.T),
        # k is b's alone and the output drops it: a sum, broadcast back in the gradient.
        ('einsum("ij,jk->i", a, b)', ([3, 4], [4, 2]), lambda a, b: (a @ b).sum(1)),
        ('einsum("ij,ij->i", a, b)', ([3, 4], [3, 4]), lambda a, b: (a * b).sum(1)),
        ('einsum("bij,bjk->bik", a, b)', ([2, 3, 4], [2, 4, 2]), torch.bmm),
        ('einsum("i,j->ij", a, b)', ([3], [4]), torch.outer),
        ('einsum("ij,jk->", a, b)', ([3, 4], [4, 2]), lambda a, b: (a @ b).sum()),
        ('einsum("ij->ji", a) * b', ([3, 4], [4, 3]), lambda a, b: a.T * b),
        ("sin(matmul(a * b, b))", ([3, 3], [3, 3]), lambda a, b: torch.sin((a * b) @ b)),
    ],
)
def test_contractions_match_autograd(expr: str, shapes: Any, reference: Any) -> None:
    module = load_module(_spec(expr, a=shapes[0], b=shapes[1]))
    _check_against_autograd(module, reference, _inputs(*map(tuple, shapes)))


def test_the_same_operand_twice_gets_both_adjoints() -> None:
    module = load_module(_spec('einsum("ij,ik->jk", a, a) + 0 * b', a=[3, 2], b=[2, 2]))
    _check_against_autograd(module, lambda a, b: a.T @ a + 0 * b, _inputs((3, 2), (2, 2)))


# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_jvp_is_the_sum_of_one_tangent_contractions() -> None:
    module = load_module(_spec('einsum("ij,jk->ik", sin(a), b)', a=[3, 4], b=[4, 2]))
    a, b = (t.detach() for t in _inputs((3, 4), (4, 2)))
    ta, tb = (t.detach() for t in _inputs((3, 4), (4, 2), seed=1))
    _, actual = torch.func.jvp(module.contraction, (a, b), (ta, tb))
    _, expected = torch.func.jvp(lambda a, b: torch.sin(a) @ b, (a, b), (ta, tb))
    torch.testing.assert_close(actual, expected)


def test_vmap_batches_a_contraction() -> None:
    module = load_module(_spec('einsum("ij,jk->ik", a, b)', a=[3, 4], b=[4, 2]))
    a, b = (t.detach() for t in _inputs((5, 3, 4), (4, 2)))
    actual = torch.func.vmap(module.contraction, in_dims=(0, None))(a, b)
    torch.testing.assert_close(actual, a @ b)


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("ij,jk", "need one '->'", 5),
        ("ij,jk->ik->", "need one '->'", 11),
        ("ij,j k->ik", "not ' '", 4),
        ("ij,jk->i,k", "the output take letters and one '->', not ','", 8),
        ('__import__("os")->', "not '_'", 0),
        ("ii,jk->ik", "repeats within one operand (a diagonal)", 1),
        ("ij,jk->kk", "repeats within the output", 8),
        ("ij,jk->iz", "output letter 'z' is in no operand", 8),
        ("ij->ij", "name 1 operands, but 2 are given", 0),
    ],
)
def test_subscripts_outside_the_grammar_are_refused_where_they_go_wrong(
    text: str, message: str, column: int
) -> None:
    with pytest.raises(contractions.SubscriptError, match=re.escape(message)) as error:
        contractions.parse_subscripts(text, 2)
    assert error.value.column == column


def test_matmul_is_the_product_of_two_matrices() -> None:
    with pytest.raises(SpecError, match="operand 1 has 3 dimensions"):
        _spec("matmul(a, b)", a=[2, 3, 4], b=[4, 2])
    with pytest.raises(SpecError, match="matmul\\(\\) takes 2 arguments, got 3"):
        _spec("matmul(a, b, b)", a=[3, 4], b=[4, 4])


def test_show_writes_the_subscripts_as_typed() -> None:
    latex = describe(load_spec(REPO_ROOT / "examples" / "vq_distances.yaml"), latex=True)
    assert "\\operatorname{einsum}{\\left(\\texttt{nd,kd->nk}, x, " in latex
