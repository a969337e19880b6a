"""amax and amin against torch.amax and torch.amin, ties included.

torch shares the gradient of amax evenly among the tied maxima (Note [Ties of amax and
amin] in symgrad.language.reductions). Finite differences cannot see that rule at a tie,
so gradcheck and gradgradcheck run on inputs without ties, and values, gradients,
second derivatives and tangents are compared with torch's autograd on inputs full of
ties: integer values, and rows of one repeated value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sympy
import torch
import torch.nn.functional as nnf
from torch.autograd import forward_ad

import symgrad
from symgrad.backends.cpp.printer import AtenPrinter
from symgrad.backends.python.printer import TorchPrinter
from symgrad.language import extrema, reductions
from tests.conftest import as_tuple, load_generated


@dataclass(frozen=True)
class Case:
    outputs: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    torch_formula: Callable[..., Any]


CASES = {
    "amax over every dim": Case({"y": "amax(x) * x"}, {"x": (3, 4)}, lambda x: x.amax() * x),
    "amin over every dim, kept": Case(
        {"y": "amin(x, keepdim=True) ** 2 + x"},
        {"x": (3, 4)},
        lambda x: x.amin(dim=(0, 1), keepdim=True) ** 2 + x,
    ),
    "amax over the last dim, not kept": Case(
        {"y": "sin(amax(x, dim=1)) * sum(x, dim=1)"},
        {"x": (3, 4)},
        lambda x: torch.sin(x.amax(dim=1)) * x.sum(dim=1),
    ),
    "amax over dim 0 times its argument": Case(
        {"y": "amax(x, dim=0) * x"}, {"x": (3, 4)}, lambda x: x.amax(dim=0) * x
    ),
    "amin over a middle dim, not kept": Case(
        {"y": "amin(x * w, dim=1) ** 2"},
        {"x": (2, 3, 4), "w": (3, 1)},
        lambda x, w: (x * w).amin(dim=1) ** 2,
    ),
    "amax over two negative dims, kept": Case(
        {"y": "x - amax(x, dim=[-1, -2], keepdim=True)"},
        {"x": (2, 3, 4)},
        lambda x: x - x.amax(dim=(-1, -2), keepdim=True),
    ),
    "amin over two dims, not kept": Case(
        {"y": "amin(x, dim=[0, 2]) * amax(x, dim=[0, 2])"},
        {"x": (2, 3, 4)},
        lambda x: x.amin(dim=(0, 2)) * x.amax(dim=(0, 2)),
    ),
    "softmax stabilised by its row max": Case(
        {"y": "exp(x - amax(x, dim=-1, keepdim=True))"},
        {"x": (3, 5)},
        lambda x: torch.exp(x - x.amax(dim=-1, keepdim=True)),
    ),
    "amax over dim -1 of a 0-d input": Case(
        {"y": "amax(x, dim=-1) * x"}, {"x": ()}, lambda x: x.amax(dim=-1) * x
    ),
    "amin over dim 0 of a 0-d input, kept": Case(
        {"y": "amin(x ** 2, dim=0, keepdim=True)"}, {"x": ()}, lambda x: (x**2).amin(0, True)
    ),
    "amax of a 0-d input over every dim": Case(
        {"y": "amax(x) ** 3"}, {"x": ()}, lambda x: x.amax() ** 3
    ),
    "pact normalisation": Case(
        {"y": "tanh(w) / (2 * amax(abs(tanh(w)))) + 0.5"},
        {"w": (4, 5)},
        lambda w: torch.tanh(w) / (2 * torch.tanh(w).abs().amax()) + 0.5,
    ),
}


def _spec(case: Case) -> symgrad.Spec:
    inputs = {n: {"type": "tensor", "shape": list(s)} for n, s in case.shapes.items()}
    return symgrad.spec_from_dict({"name": "Case", "inputs": inputs, "outputs": case.outputs})


@functools.cache
def _function(name: str) -> Any:
    """The generated function of case `name`, generated once for all the tests below."""
    spec = _spec(CASES[name])
    return getattr(symgrad.load_module(spec), spec.module)


def _inputs(case: Case, kind: str, seed: int) -> list[torch.Tensor]:
    """Inputs of `kind`: distinct random values, small integers, or one repeated value."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for shape in case.shapes.values():
        if kind == "distinct":
            value = torch.randn(shape, generator=generator, dtype=torch.float64)
        elif kind == "integers":
            value = torch.randint(-2, 3, shape, generator=generator).to(torch.float64)
        else:
            value = torch.full(shape, 0.75, dtype=torch.float64)
        tensors.append(value.requires_grad_())
    return tensors


KINDS = ("distinct", "integers", "constant")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name: str, kind: str) -> None:
    case = CASES[name]
    inputs = _inputs(case, kind, seed=len(name))
    ours = as_tuple(_function(name)(*inputs))
    theirs = as_tuple(case.torch_formula(*inputs))
    generator = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in theirs]
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference)
    got = torch.autograd.grad(ours, inputs, cotangents, create_graph=True)
    want = torch.autograd.grad(theirs, inputs, cotangents, create_graph=True)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w)
    # Second order: the gradient of <gradient, v> by the inputs and the cotangents.
    directions = [torch.randn(g.shape, generator=generator, dtype=g.dtype) for g in got]
    wrt = [*inputs, *(c.requires_grad_() for c in cotangents)]
    for g, w in zip(_second(got, wrt, directions), _second(want, wrt, directions), strict=True):
        if g is None or w is None:  # no second derivative: a zero one is the same
            present = w if g is None else g
            assert present is None or torch.count_nonzero(present) == 0
            continue
        torch.testing.assert_close(g, w)


def _second(
    grads: tuple[torch.Tensor, ...], wrt: list[torch.Tensor], directions: list[torch.Tensor]
) -> tuple[torch.Tensor | None, ...]:
    """The gradient of sum(<grad, direction>) by `wrt`; None where it has none."""
    terms = [(g * d).sum() for g, d in zip(grads, directions, strict=True) if g.requires_grad]
    if not terms:  # gradients linear in the cotangents with constant coefficients
        return (None,) * len(wrt)
    return torch.autograd.grad(sum(terms), wrt, allow_unused=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(name: str) -> None:
    inputs = tuple(_inputs(CASES[name], "distinct", seed=0))
    assert torch.autograd.gradcheck(_function(name), inputs)
    assert torch.autograd.gradgradcheck(_function(name), inputs)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_tangents_match_torch(name: str, kind: str) -> None:
    """torch's jvp of amax averages the tangent over the ties."""
    case = CASES[name]
    primals = [t.detach() for t in _inputs(case, kind, seed=2)]
    generator = torch.Generator().manual_seed(3)
    tangents = [torch.randn(p.shape, generator=generator, dtype=p.dtype) for p in primals]
    results = []
    for formula in (_function(name), case.torch_formula):
        with forward_ad.dual_level():
            duals = [forward_ad.make_dual(p, t) for p, t in zip(primals, tangents, strict=True)]
            results.append([forward_ad.unpack_dual(o).tangent for o in as_tuple(formula(*duals))])
    for mine, reference in zip(*results, strict=True):
        torch.testing.assert_close(mine, reference)


def test_a_row_of_equal_values_shares_the_gradient_evenly() -> None:
    spec = _spec(Case({"y": "amax(x, dim=1)"}, {"x": (2, 4)}, torch.amax))
    function = getattr(symgrad.load_module(spec), spec.module)
    x = torch.tensor([[2.0, 2.0, 2.0, 2.0], [1.0, 3.0, 3.0, 0.0]], requires_grad=True)
    (grad,) = torch.autograd.grad(function(x), x, torch.tensor([1.0, 6.0]))
    assert grad.tolist() == [[0.25, 0.25, 0.25, 0.25], [0.0, 3.0, 3.0, 0.0]]


def test_elementwise_max_and_min_are_unchanged() -> None:
    """max(a, b) and min(a, b) stay elementwise, beside the reductions."""
    case = Case(
        {"y": "max(a, b) + min(a, b) * amax(a)"},
        {"a": (3,), "b": (3,)},
        lambda a, b: torch.maximum(a, b) + torch.minimum(a, b) * a.amax(),
    )
    function = symgrad.load_module(_spec(case)).case
    a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.0, 0.0, 4.0], dtype=torch.float64, requires_grad=True)
    cotangent = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    got = torch.autograd.grad(function(a, b), (a, b), cotangent)
    want = torch.autograd.grad(case.torch_formula(a, b), (a, b), cotangent)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_a_row_holding_nan_has_a_nan_gradient_as_in_torch() -> None:
    spec = _spec(Case({"y": "amax(x, dim=1)"}, {"x": (2, 3)}, torch.amax))
    function = getattr(symgrad.load_module(spec), spec.module)
    x = torch.tensor([[1.0, float("nan"), 2.0], [3.0, 3.0, 1.0]], requires_grad=True)
    (grad,) = torch.autograd.grad(function(x), x, torch.ones(2))
    (want,) = torch.autograd.grad(torch.amax(x, dim=1), x, torch.ones(2))
    torch.testing.assert_close(grad, want, equal_nan=True)


def test_the_dorefa_example_shares_the_gradient_of_tied_weights() -> None:
    """examples/dorefa_weight.yaml: w = 1 and w = -1 tie for the largest |tanh(w)|."""
    function = load_generated("dorefa_weight").dorefa_weight
    w = torch.tensor([[1.0, -1.0, 0.5], [0.0, 1.0, -0.25]], dtype=torch.float64)
    w.requires_grad_()
    cotangent = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    t = torch.tanh(w)
    want = torch.autograd.grad(t / (2 * t.abs().amax()) + 0.5, w, cotangent)
    torch.testing.assert_close(torch.autograd.grad(function(w), w, cotangent), want)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_ties_are_found_in_a_recomputed_argument() -> None:
    """The jvp and the double backward compute mish again with torch's kernel, the
    forward with its CPU form: the argument differs in its last bits from the one the
    forward's amax came from, and compared with the saved amax it had no ties (NaN)."""
    case = Case(
        {"y": "amax(sin(abs(mish(x)) * x), dim=-1)"},
        {"x": (64, 8)},
        lambda x: torch.sin(nnf.mish(x).abs() * x).amax(dim=-1),
    )
    function = symgrad.load_module(_spec(case)).case
    x = _inputs(case, "distinct", seed=4)[0]
    tangent = torch.randn_like(x)
    results = []
    for formula in (function, case.torch_formula):
        with forward_ad.dual_level():
            results.append(forward_ad.unpack_dual(formula(forward_ad.make_dual(x, tangent))))
    torch.testing.assert_close(results[0].tangent, results[1].tangent)
    cotangent = torch.randn(64, dtype=torch.float64)
    grads, seconds = [], []
    for formula in (function, case.torch_formula):
        (grad,) = torch.autograd.grad(formula(x), x, cotangent, create_graph=True)
        grads.append(grad)
        seconds.append(torch.autograd.grad((grad * tangent * x).sum(), x))
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(seconds[0], seconds[1])


@pytest.mark.parametrize(
    ("dims", "keepdim", "python", "cpp"),
    [
        (None, False, "torch.amax(x)", "at::amax(x)"),
        # torch types amax's dim as dims (None is untyped) and at::amax takes no nullopt.
        (None, True, "torch.amax(x, dim=(), keepdim=True)", "at::amax(x, at::IntArrayRef{}, true)"),
        ((0, 2), False, "torch.amax(x, dim=(0, 2))", "at::amax(x, at::IntArrayRef{0, 2})"),
        (
            (-1,),
            True,
            "torch.amax(x, dim=-1, keepdim=True)",
            "at::amax(x, at::IntArrayRef{-1}, true)",
        ),
    ],
)
def test_amax_over_every_dim_is_spelled_as_torch_types_it(
    dims: tuple[int, ...] | None, keepdim: bool, python: str, cpp: str
) -> None:
    x = sympy.Symbol("x", real=True)
    node = reductions.reduce("amax", x, dims, keepdim)
    assert TorchPrinter({x}).doprint(node) == python
    assert AtenPrinter({x}).doprint(node) == cpp
    again = extrema.is_tie(node).rhs  # the extremum taken again, kept, for the ties
    assert TorchPrinter({x}).doprint(again).startswith("torch.amax(x, dim=")
