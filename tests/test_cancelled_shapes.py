"""Terms that sympy cancels keep their broadcast shape (Note [Cancelled shapes]).

Each case is a spec whose terms cancel as the frontend builds it, its input shapes
and the same formula in torch, written as the spec writes it. The generated Function's
outputs and gradients must have autograd's shapes, values and presence: an input
whose terms cancelled gets zeros of its shape where autograd gives them, never None.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as nnf

import symgrad
from tests.conftest import as_tuple

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script.*is deprecated:DeprecationWarning"
)


@dataclass(frozen=True)
class Case:
    outputs: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    torch_formula: Callable[..., Any]
    where: dict[str, str] | None = None


CASES = {
    "a sum whose tensor term cancels": Case(
        {"y": "(tanh(x1) + x2) - tanh(x1)"},
        {"x1": (2, 4), "x2": (4,)},
        lambda x1, x2: (torch.tanh(x1) + x2) - torch.tanh(x1),
    ),
    "a reduction's argument whose tensor term cancels": Case(
        {"y": "sum(tanh(x2 - (w0 + x2) - 1.5)**2, dim=-1, keepdim=True)"},
        {"x0": (), "x2": (4,)},
        lambda x0, x2: torch.sum(
            torch.tanh(x2 - (torch.sin(x0) + x2) - 1.5) ** 2, dim=-1, keepdim=True
        ),
        where={"w0": "sin(x0)"},
    ),
    "two outputs, one of a larger value that cancels": Case(
        {"y0": "x1 + cos(softplus(w0))", "y1": "(w0 + x2) - w0"},
        {"x0": (2, 3), "x1": (3,), "x2": (3,)},
        lambda x0, x1, x2: (
            x1 + torch.cos(nnf.softplus(torch.tanh(x0))),
            (torch.tanh(x0) + x2) - torch.tanh(x0),
        ),
        where={"w0": "tanh(x0)"},
    ),
    "a product that cancels": Case(
        {"y": "a * x / a"},
        {"a": (2, 4), "x": (4,)},
        lambda a, x: a * x / a,
    ),
    "a difference of equal terms": Case({"y": "x - x"}, {"x": (4,)}, lambda x: x - x),
    "a product with zero": Case({"y": "0 * x"}, {"x": (2, 3)}, lambda x: 0 * x),
    "a reduced input whose terms cancelled": Case(
        {"y": "tanh(x1) * (mean(x2 - x0, dim=0) - mean(x2 - x0, dim=0) + 1)"},
        {"x0": (1,), "x1": (), "x2": (3,)},
        lambda x0, x1, x2: torch.tanh(x1) * ((x2 - x0).mean(0) - (x2 - x0).mean(0) + 1),
    ),
    "zero times a larger input, plus a smaller one": Case(
        {"y": "0 * a + x"}, {"a": (2, 4), "x": (4,)}, lambda a, x: 0 * a + x
    ),
    "a softmax of a row that cancels": Case(
        {"y": "softmax(x + a - a, dim=-1)"},
        {"a": (4,), "x": ()},
        lambda a, x: torch.softmax(x + a - a, dim=-1),
    ),
    "a reduction that cancels": Case(
        {"y": "sum(a, dim=0, keepdim=True) + x - sum(a, dim=0, keepdim=True)"},
        {"a": (3, 4), "x": ()},
        lambda a, x: a.sum(0, keepdim=True) + x - a.sum(0, keepdim=True),
    ),
    "equal branches under a condition on a larger input": Case(
        {"y": "where(a > 0, 0, 0) + x"},
        {"a": (2, 4), "x": (4,)},
        lambda a, x: torch.where(a > 0, 0.0, 0.0) + x,
    ),
    "a reduction that is all a cancelled sum leaves": Case(
        {"y": "tanh(mean(x2, keepdim=True) - (x1 - x1 + x2) + (x1 - x1 + x2))"},
        {"x1": (2,), "x2": ()},
        lambda x1, x2: torch.tanh(
            x2.mean(dim=None, keepdim=True) - (x1 - x1 + x2) + (x1 - x1 + x2)
        ),
    ),
    "a term that cancels beside a reduction of the same input": Case(
        {"y0": "mean(x) - x + x", "y1": "mean(mean(x) - x + x, dim=-1, keepdim=True)"},
        {"x": (2,)},
        lambda x: (x.mean() - x + x, (x.mean() - x + x).mean(dim=-1, keepdim=True)),
    ),
    "an output that is a named value once terms cancel": Case(
        {
            "y0": "sqrt(erf(w0)**2 + 0.5) - softplus(x0 * x0) + softplus(x0 * x0)",
            "y1": "mean(log(1 + sum(w0)**2), keepdim=True)",
        },
        {"x0": ()},
        lambda x0: (
            torch.sqrt(torch.erf(torch.minimum(x0, 2 * x0)) ** 2 + 0.5)
            - nnf.softplus(x0 * x0)
            + nnf.softplus(x0 * x0),
            torch.log(1 + torch.minimum(x0, 2 * x0).sum() ** 2).mean(dim=None, keepdim=True),
        ),
        where={"w0": "min(x0, 2 * x0)"},
    ),
    "one value returned as two outputs, its gradient only in the last slot": Case(
        {"y0": "w0", "y1": "-atan2(w0, 1 + sin(w0)**2)", "y2": "w0"},
        {"x0": ()},
        lambda x0: (
            w0 := torch.log(1 + (x0 - x0) ** 2),
            -torch.atan2(w0, 1 + torch.sin(w0) ** 2),
            w0,
        ),
        where={"w0": "log(1 + (x0 - x0)**2)"},
    ),
}


def _function(case: Case) -> Callable[..., Any]:
    """The generated Function of `case`."""
    data: dict[str, Any] = {
        "name": "Cancelled",
        "inputs": {name: {"type": "tensor", "shape": list(s)} for name, s in case.shapes.items()},
        "outputs": case.outputs,
    }
    if case.where is not None:
        data["where"] = case.where
    spec = symgrad.spec_from_dict(data)
    function: Callable[..., Any] = getattr(symgrad.load_module(spec), spec.module)
    return function


@pytest.mark.parametrize("name", CASES)
def test_outputs_and_gradients_match_autograd(name: str) -> None:
    case = CASES[name]
    function = _function(case)
    generator = torch.Generator().manual_seed(0)
    inputs = [
        torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)
        for shape in case.shapes.values()
    ]
    mine = as_tuple(function(*inputs))
    want = as_tuple(case.torch_formula(*inputs))
    assert [m.shape for m in mine] == [w.shape for w in want]
    for m, w in zip(mine, want, strict=True):
        torch.testing.assert_close(m, w)
    cotangents = [torch.randn(w.shape, generator=generator, dtype=torch.float64) for w in want]
    mine_grads = torch.autograd.grad(mine, inputs, cotangents, allow_unused=True)
    want_grads = torch.autograd.grad(want, inputs, cotangents, allow_unused=True)
    for input_name, m, w in zip(case.shapes, mine_grads, want_grads, strict=True):
        assert (m is None) == (w is None), f"{input_name}: {m} where autograd gives {w}"
        if w is not None:
            assert m.shape == w.shape, input_name
            torch.testing.assert_close(m, w)
    assert torch.autograd.gradcheck(function, tuple(inputs))


@pytest.mark.parametrize("name", ["a sum whose tensor term cancels", "a difference of equal terms"])
def test_the_jvp_has_the_output_shape(name: str) -> None:
    case = CASES[name]
    function = _function(case)
    primals = tuple(torch.randn(s, dtype=torch.float64) for s in case.shapes.values())
    tangents = tuple(torch.randn_like(p) for p in primals)
    _, mine = torch.func.jvp(function, primals, tangents)
    _, want = torch.func.jvp(case.torch_formula, primals, tangents)
    assert mine.shape == want.shape
    torch.testing.assert_close(mine, want)


def test_an_expression_that_cancels_nothing_is_built_as_before() -> None:
    spec = symgrad.spec_from_dict(
        {"name": "Plain", "inputs": {"x": "tensor", "a": "tensor"}, "outputs": {"y": "a * x"}}
    )
    source = symgrad.generate(spec)["plain.py"]
    assert "broadcast_tensors" not in source and "zeros_like" not in source


def test_the_cpp_target_keeps_the_shape() -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "Cancelled",
            "inputs": {"x1": "tensor", "x2": "tensor"},
            "outputs": {"y": "(tanh(x1) + x2) - tanh(x1)", "z": "x2 - x2"},
        }
    )
    source = symgrad.generate(spec, "cpp")["cancelled.cpp"]
    assert "at::broadcast_tensors({x2, x1})[0].clone()" in source
    assert "at::full_like(x2, 0)" in source
    assert re.search(
        r"grad_x1 = detail::accumulate\(grad_x1, at::zeros\(_t\d+, grad_y.options\(\)\)\)", source
    )


def test_a_cancelled_number_keeps_nothing() -> None:
    """`softmax(x) - k + k` is the softmax itself, differentiable, built as without k."""
    spec = symgrad.spec_from_dict(
        {
            "name": "CancelledNumber",
            "inputs": {"x": "tensor", "k": {"type": "float", "default": 0.5}},
            "outputs": {"y": "softmax(x, dim=-1) - softplus(k) + softplus(k)"},
        }
    )
    source = symgrad.generate(spec)["cancelled_number.py"]
    assert "broadcast_tensors" not in source and "softmax0" not in source
    function = getattr(symgrad.load_module(spec), spec.module)
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    cotangent = torch.randn(2, 3, dtype=torch.float64)
    (mine,) = torch.autograd.grad(function(x, 0.5), x, cotangent)
    (want,) = torch.autograd.grad(torch.softmax(x, dim=-1), x, cotangent)
    torch.testing.assert_close(mine, want)
