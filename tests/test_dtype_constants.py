"""finfo_eps(x): the eps of the input's dtype at call time (Note [Dtype constants]).

ClampProbs is pyro's `clamp_probs` (pyro.distributions.util): probabilities clamped to
[eps, 1 - eps] with `eps = torch.finfo(probs.dtype).eps`, so float32's eps in float32
and float64's in float64; autograd's clamp gradient passes inside the bounds only.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from symgrad.api import load_module, load_spec, spec_from_dict
from symgrad.errors import SpecError

REPO_ROOT = Path(__file__).resolve().parent.parent


def _clamp_probs(probs: torch.Tensor) -> torch.Tensor:
    """pyro.distributions.util.clamp_probs, as pyro writes it."""
    eps = torch.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_clamp_probs_matches_pyro_in_each_dtype(dtype: torch.dtype) -> None:
    module = load_module(load_spec(REPO_ROOT / "examples" / "clamp_probs.yaml"))
    eps = torch.finfo(dtype).eps
    # Each side of both bounds, the bounds themselves, and values far inside.
    values = [0.0, eps / 2, eps, 2 * eps, 0.5, 1 - 2 * eps, 1 - eps, 1 - eps / 2, 1.0]
    probs = torch.tensor(values, dtype=dtype, requires_grad=True)
    output = module.clamp_probs(probs)
    expected = _clamp_probs(probs)
    assert output.dtype == dtype
    torch.testing.assert_close(output, expected, rtol=0, atol=0)
    grad_output = torch.linspace(1, 2, len(values), dtype=dtype)
    (grad,) = torch.autograd.grad(output, probs, grad_output)
    (want,) = torch.autograd.grad(expected, probs, grad_output)
    torch.testing.assert_close(grad, want, rtol=0, atol=0)


def test_finfo_eps_is_float32s_in_float32() -> None:
    """Not float64's value frozen into the spec: the two dtypes give different outputs."""
    spec = {"name": "Eps", "inputs": {"x": "tensor"}, "outputs": {"y": "x + finfo_eps(x)"}}
    module = load_module(spec_from_dict(spec))
    for dtype in (torch.float32, torch.float64):
        x = torch.zeros(3, dtype=dtype, requires_grad=True)
        y = module.eps(x)
        assert y.tolist() == [torch.finfo(dtype).eps] * 3
        (grad,) = torch.autograd.grad(y.sum(), x)
        assert grad.tolist() == [1.0] * 3  # the eps is constant for differentiation
        assert torch.autograd.gradgradcheck(module.Eps.apply, (x.double(),))


@pytest.mark.parametrize(
    "expr", ["finfo_eps(2 * x)", "finfo_eps(n)", "finfo_eps(f)", "finfo_eps(x, x)"]
)
def test_finfo_eps_takes_one_tensor_inputs_name(expr: str) -> None:
    spec = {
        "name": "Eps",
        "inputs": {
            "x": "tensor",
            "n": {"type": "int", "default": 2},
            "f": {"type": "float", "default": 1.0},
        },
        "outputs": {"y": f"x + {expr}"},
    }
    with pytest.raises(SpecError, match="finfo_eps"):
        load_module(spec_from_dict(spec))


def test_a_cancelled_operand_keeps_its_shape_beside_finfo_eps() -> None:
    """`x - (x + finfo_eps(x))` is `-finfo_eps(x)` to sympy, a 0-d value: x's shape is
    kept, as torch computes the expression as written (fuzz seed 710083's einsum)."""
    spec = {
        "name": "Eps",
        "inputs": {"x": {"type": "tensor", "shape": [3, 2]}},
        "outputs": {"y": 'einsum("ij->ji", x - (x + finfo_eps(x)))'},
    }
    module = load_module(spec_from_dict(spec))
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    y = module.eps(x)
    torch.testing.assert_close(y, (x - (x + torch.finfo(x.dtype).eps)).t())
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert grad.tolist() == [[0.0, 0.0]] * 3
