"""cumprod: the generated Function against torch.cumprod, with zeros in the input.

Its derivatives are exact with any zeros (Note [Cumprod's exact derivatives] in
symgrad.language.scans): values, gradients and tangents are checked against torch, and
the second order against a cumprod written as a running product, whose autograd is
exact at zeros by construction (torch's own double backward of cumprod is a loop there).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from symgrad.api import generate, load_module, spec_from_dict
from symgrad.errors import SpecError

SPEC = {
    "name": "Products",
    "inputs": {"x": {"type": "tensor", "shape": [4, 6]}, "w": {"type": "tensor", "shape": [6]}},
    "outputs": {"y": "cumprod(x, -1) * sin(x) + cumprod(x * w, 0)"},
}


def _running_product(x: torch.Tensor, dim: int) -> torch.Tensor:
    """cumprod as a product taken one position at a time: exact autograd at zeros."""
    pieces = x.unbind(dim)
    products = [pieces[0]]
    for piece in pieces[1:]:
        products.append(products[-1] * piece)
    return torch.stack(products, dim)


def _reference(x: torch.Tensor, w: torch.Tensor, cumprod: Any = torch.cumprod) -> torch.Tensor:
    result: torch.Tensor = cumprod(x, -1) * torch.sin(x) + cumprod(x * w, 0)
    return result


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Rows with no zero, one, two and three zeros along the last dim (and so along 0)."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    x[1, 2] = 0
    x[2, 1] = x[2, 4] = 0
    x[3, 0] = x[3, 3] = x[3, 5] = 0
    w = torch.rand(6, generator=generator, dtype=torch.float64).add(0.5)
    return x.requires_grad_(), w.requires_grad_()


@pytest.fixture(scope="module")
def module() -> Any:
    return load_module(spec_from_dict(SPEC))


def test_values_and_gradients_match_torch(module: Any) -> None:
    x, w = _inputs()
    actual, expected = module.products(x, w), _reference(x, w)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn_like(actual)
    grads = torch.autograd.grad(actual, (x, w), cotangent)
    wants = torch.autograd.grad(expected, (x, w), cotangent)
    for grad, want in zip(grads, wants, strict=True):
        torch.testing.assert_close(grad, want)


def test_second_order_is_exact_at_zeros(module: Any) -> None:
    """Hessian-vector products with one, two and three zeros in a line."""
    x, w = _inputs()
    generator = torch.Generator().manual_seed(8)
    cotangent = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    vectors = [torch.randn(t.shape, generator=generator, dtype=torch.float64) for t in (x, w)]

    def hvp(function: Any) -> tuple[torch.Tensor, ...]:
        grads = torch.autograd.grad(function(x, w), (x, w), cotangent, create_graph=True)
        inner = sum((g * v).sum() for g, v in zip(grads, vectors, strict=True))
        return torch.autograd.grad(inner, (x, w))

    actual = hvp(module.products)
    expected = hvp(lambda a, b: _reference(a, b, _running_product))
    for value, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(value, want)
    assert torch.autograd.gradcheck(module.Products.apply, (x, w))
    assert torch.autograd.gradgradcheck(module.Products.apply, (x, w))


# Forward AD loads decompositions with torch.jit.script, which warns in torch 2.11+.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_jvp_and_vmap_match_torch(module: Any) -> None:
    x, w = (t.detach() for t in _inputs())
    tangents = (torch.randn_like(x), torch.randn_like(w))
    _, actual = torch.func.jvp(module.products, (x, w), tangents)
    _, expected = torch.func.jvp(lambda a, b: _reference(a, b, _running_product), (x, w), tangents)
    torch.testing.assert_close(actual, expected)
    batch = torch.stack([x, x.flip(0)])
    mapped = torch.func.vmap(module.products, in_dims=(0, None))(batch, w)
    torch.testing.assert_close(mapped, torch.stack([_reference(b, w) for b in batch]))


def test_the_derivatives_are_torch_kernels_without_loops() -> None:
    """The backward reads cumprods, cumsums and flips, never a loop or an n x n tensor."""
    source = generate(spec_from_dict(SPEC))["products.py"]
    function = source[source.index("def backward(") : source.index("def jvp(")]
    compact = "".join(function.split())
    assert "torch.cumprod(" in compact and "torch.flip(torch.cumsum(torch.flip(" in compact
    assert not any(line.lstrip().startswith("for ") for line in function.splitlines())


def test_cumprod_needs_a_dim() -> None:
    data = {"name": "F", "inputs": {"x": "tensor"}, "outputs": {"y": "cumprod(x)"}}
    with pytest.raises(SpecError, match=r"cumprod\(\) needs a dim, e.g. cumprod\(x, dim=-1\)"):
        spec_from_dict(data)
