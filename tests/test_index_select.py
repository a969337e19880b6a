"""index_select(e, dim, index): torch.index_select by an index input, in the language.

Its gradient is the segment sum (index_add) of the gradient into zeros of the selected
value's shape, and its tangent the index_select of the tangent: checked against torch's
autograd of the same formula, with gradcheck and gradgradcheck in float64, jvp and vmap.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from symgrad.api import generate, load_module, spec_from_dict
from symgrad.errors import SpecError


def _spec(output: str, index: list[int] | None = None) -> Any:
    """A spec of one output over x [4, 3] and a 1-d index of six positions."""
    inputs = {
        "x": {"type": "tensor", "shape": [4, 3]},
        "index": {"type": "index", "shape": index or [6]},
    }
    return spec_from_dict({"name": "Select", "inputs": inputs, "outputs": {"y": output}})


# Each with the same formula in plain torch, as autograd's reference.
CASES = {
    "index_select(sin(x) * x, 0, index) ** 2": lambda x, i: (
        torch.index_select(torch.sin(x) * x, 0, i) ** 2
    ),
    "index_select(x, -2, index) * index_select(x**2, 0, index)": lambda x, i: (
        torch.index_select(x, -2, i) * torch.index_select(x**2, 0, i)
    ),
}


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x in float64, and an index that reads row 2 three times and row 3 never."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    return x, torch.tensor([2, 0, 2, 1, 2, 0])


@pytest.mark.parametrize(
    "output",
    list(CASES),
)
def test_index_select_against_autograd(output: str) -> None:
    module = load_module(_spec(output))
    x, index = _inputs()
    actual, expected = module.select(x, index), CASES[output](x, index)
    torch.testing.assert_close(actual, expected)
    cotangent = torch.randn_like(expected)
    (grad,) = torch.autograd.grad(actual, x, cotangent)
    (want,) = torch.autograd.grad(expected, x, cotangent)
    torch.testing.assert_close(grad, want)
    assert torch.autograd.gradcheck(module.Select.apply, (x, index))
    assert torch.autograd.gradgradcheck(module.Select.apply, (x, index))


def test_the_gradient_is_an_index_add_into_the_values_shape() -> None:
    source = generate(_spec("index_select(x, 1, index) ** 2", index=[5]))["select.py"]
    assert ".index_add(1, index, " in source
    assert "one_hot" not in source


# torch.func.jvp loads torch's jvp decompositions through torch.jit.script once.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_the_tangent_is_the_index_select_of_the_tangent() -> None:
    module = load_module(_spec("index_select(sin(x) * x, 0, index) ** 2"))
    x, index = _inputs(1)
    tangent = torch.randn_like(x)
    _, jvp = torch.func.jvp(lambda v: module.select(v, index), (x.detach(),), (tangent,))
    _, want = torch.func.jvp(
        lambda v: torch.index_select(torch.sin(v) * v, 0, index) ** 2, (x.detach(),), (tangent,)
    )
    torch.testing.assert_close(jvp, want)


def test_vmap_batches_an_index_select() -> None:
    module = load_module(_spec("index_select(sin(x) * x, 0, index) ** 2"))
    x = torch.randn(5, 4, 3, dtype=torch.float64)
    index = torch.tensor([2, 0, 2, 1, 2, 0])
    actual = torch.func.vmap(module.select, in_dims=(0, None))(x, index)
    torch.testing.assert_close(actual, torch.index_select(torch.sin(x) * x, 1, index) ** 2)
    grads = torch.func.vmap(torch.func.grad(lambda v: module.select(v, index).sum()))(x)
    wants = torch.func.vmap(
        torch.func.grad(lambda v: (torch.index_select(torch.sin(v) * v, 0, index) ** 2).sum())
    )(x)
    torch.testing.assert_close(grads, wants)


@pytest.mark.parametrize(
    ("output", "index", "message"),
    [
        ("index_select(x, 2, index)", [6], "index_select() dim 2 is out of range"),
        ("index_select(x, 0, index)", [2, 3], "index 'index' must be 1-d"),
        ("index_select(x, 0, x)", [6], "the index must be an input of type: index"),
        ("index_select(x, 0)", [6], "index_select() needs index"),
        ("index_select(x, 0, index, 1)", [6], "takes an expression, then dim and index"),
        ("index_select(sum(x), 0, index)", [6], "needs a value with dimensions"),
        ("index_select(x, 0, indx=index)", [6], "has no argument 'indx'"),
    ],
)
def test_index_select_misuses_are_refused(output: str, index: list[int], message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)) as error:
        _spec(output, index)
    assert error.value.key_path.startswith("outputs.y")


@pytest.mark.parametrize(
    ("output", "moved"),
    [
        ("where(x > 0, sqrt(index_select(x, 0, index)), 0)", lambda x, i: x.index_select(0, i)),
        (
            "where(x > 0, log(segment_sum(x, index, 0, 4)), 0)",
            lambda x, i: x.new_zeros(4, 3).index_add(0, i, x),
        ),
        (
            "where(x > 0, log(segment_amax(x, index, 0, 4)), 0)",
            lambda x, i: x.new_zeros(4, 3).scatter_reduce(
                0, i.unsqueeze(1).expand(4, 3), x, "amax", include_self=False
            ),
        ),
    ],
)
def test_a_guarded_branch_guards_a_selection_as_a_whole(output: str, moved: Any) -> None:
    """A `where` branch's NaN guard replaces the index_select or segment reduction, not
    its argument (whose positions are not the condition's) nor the index: the values
    are torch's, NaN where the taken branch reads a negative value, and the gradients
    those of the branch guarded as a whole."""
    spec = _spec(output, index=[4])
    module = load_module(spec)
    x = torch.tensor(
        [[1.0, -2.0, 3.0], [-1.0, 2.0, 3.0], [2.0, 2.0, -3.0], [1.0, 1.0, 1.0]],
        dtype=torch.float64,
        requires_grad=True,
    )
    index = torch.tensor([1, 0, 3, 1])
    function = torch.sqrt if "sqrt" in output else torch.log
    value = moved(x, index)
    actual = module.select(x, index)
    torch.testing.assert_close(actual, torch.where(x > 0, function(value), 0), equal_nan=True)
    assert actual.isnan().any()  # row 1 is read where row 0 is positive
    expected = torch.where(x > 0, function(torch.where(x > 0, value, 1)), 0)
    cotangent = torch.randn_like(expected)
    (grad,) = torch.autograd.grad(actual, x, cotangent)
    (want,) = torch.autograd.grad(expected, x, cotangent)
    torch.testing.assert_close(grad, want, equal_nan=True)
