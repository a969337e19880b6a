"""Formulas written out by hand against torch's stable built-ins, at extreme float32 inputs.

Each row is a spelling users write (softmax through a `where` name, softplus with a slope,
the stable BCE-with-logits idiom, ...) and the torch function that computes the same
thing. At ±100, ±30, ±10, ±1e-4, 0 and ±1e-30 in float32, wherever torch's own float32
result is finite, the generated forward and gradients must be finite and within
max(4 x torch's float32 error, 1e-6 x the condition scale) of the float64 value, where
the condition scale of a value q is |q| + sum_i |dq/dx_i * x_i|. The rewrites
themselves (symgrad.ad.stable, symgrad.ad.idioms) are checked after: which stable
primitive the forward names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sympy
import torch
from torch.nn import functional as F  # noqa: N812

import symgrad
from symgrad.ad.derive import derive
from symgrad.language import functions, piecewise, reductions

POINTS = (100.0, -100.0, 30.0, -30.0, 10.0, -10.0, 1e-4, -1e-4, 0.0, 1e-30, -1e-30)
ROWS = (
    (100.0, 0.0, -100.0, 1e-4),
    (-100.0, -100.0, -100.0, -100.0),  # a masked row
    (100.0, 100.0, 100.0, 100.0),
    (0.0, 0.0, 0.0, 0.0),
    (30.0, -30.0, 10.0, -10.0),
    (1e-30, -1e-30, 1e-4, -1e-4),
    (100.0, 100.0, 30.0, -1e-30),
)
TARGETS = (0.0, 0.3, 1.0)


def _grid(*axes: tuple[float, ...]) -> tuple[torch.Tensor, ...]:
    """Every combination of the axes' points, one flat float64 tensor per axis."""
    mesh = torch.meshgrid(*(torch.tensor(a, dtype=torch.float64) for a in axes), indexing="ij")
    return tuple(m.flatten() for m in mesh)


def _rows() -> tuple[torch.Tensor, ...]:
    return (torch.tensor(ROWS, dtype=torch.float64),)


def _rows_and_targets() -> tuple[torch.Tensor, ...]:
    x = torch.tensor(ROWS, dtype=torch.float64)
    return x, torch.softmax(torch.arange(4.0, dtype=torch.float64).expand_as(x), dim=-1)


@dataclass(frozen=True)
class Case:
    # The spec's `where` and `outputs` (inputs are named by the reference's arguments).
    outputs: dict[str, str]
    reference: Callable[..., torch.Tensor]
    # The inputs, float64, in order.
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    names: tuple[str, ...] = ("x",)
    where: dict[str, str] | None = None


def _x() -> tuple[torch.Tensor, ...]:
    return _grid(POINTS)


def _ab() -> tuple[torch.Tensor, ...]:
    return _grid(POINTS, POINTS)


def _zt() -> tuple[torch.Tensor, ...]:
    return _grid(POINTS, TARGETS)


# log1mexp's domain, x <= 0, at the points.
NEGATIVE_POINTS = (-100.0, -30.0, -10.0, -1.0, -1e-4, -1e-30, 0.0)


def _negative() -> tuple[torch.Tensor, ...]:
    return _grid(NEGATIVE_POINTS)


def _positive() -> tuple[torch.Tensor, ...]:
    return _grid(tuple(-p for p in NEGATIVE_POINTS))


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)), accurate for every x < 0 (Maechler 2012); torch has no kernel.

    Each form reads only its own side of -ln 2: the other's infinite derivative (log1p's
    at x = -1e-30) would make autograd's gradient NaN (0 * inf).
    """
    near = x > -math.log(2)
    return torch.where(
        near,
        torch.log(-torch.expm1(torch.where(near, x, -1.0))),
        torch.log1p(-torch.exp(torch.where(near, -1.0, x))),
    )


def _softplus2(x: torch.Tensor) -> torch.Tensor:
    return F.softplus(x, beta=2.0)


def _cross_entropy(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return -(t * torch.log_softmax(x, dim=-1)).sum(dim=-1)


EX = {"ex": "exp(x)"}
CASES: dict[str, Case] = {
    "softmax through a where name": Case(
        {"y": "ex / sum(ex, dim=-1, keepdim=True)"}, lambda x: F.softmax(x, -1), _rows, where=EX
    ),
    "softmax through two where names": Case(
        {"y": "ex / s"},
        lambda x: F.softmax(x, -1),
        _rows,
        where={**EX, "s": "sum(ex, dim=1, keepdim=True)"},
    ),
    "softmax over dim 0, keepdim false": Case(
        {"y": "exp(x) / sum(exp(x), dim=0)"}, lambda x: F.softmax(x, 0), _rows
    ),
    "softmax times a factor": Case(
        {"y": "3 * ex / sum(ex, dim=-1, keepdim=True)"},
        lambda x: 3 * F.softmax(x, -1),
        _rows,
        where=EX,
    ),
    "log of softmax through a where name": Case(
        {"y": "log(ex / sum(ex, dim=-1, keepdim=True))"},
        lambda x: F.log_softmax(x, -1),
        _rows,
        where=EX,
    ),
    "log-softmax with a named logsumexp": Case(
        {"y": "x - lse"},
        lambda x: F.log_softmax(x, -1),
        _rows,
        where={"lse": "log(sum(exp(x), dim=-1, keepdim=True))"},
    ),
    "logsumexp through where names": Case(
        {"y": "log(s)"},
        lambda x: torch.logsumexp(x, -1),
        _rows,
        where={**EX, "s": "sum(ex, dim=-1)"},
    ),
    "cross-entropy inside a larger formula": Case(
        {"y": "-sum(t * log(ex / sum(ex, dim=-1, keepdim=True)), dim=-1)"},
        _cross_entropy,
        _rows_and_targets,
        ("x", "t"),
        where=EX,
    ),
    "softplus with a slope, log1p": Case({"y": "log1p(exp(2 * x)) / 2"}, _softplus2, _x),
    "softplus with a slope through a where name": Case(
        {"y": "log1p(e) / 2"}, _softplus2, _x, where={"e": "exp(2 * x)"}
    ),
    "softplus, log1p": Case({"y": "log1p(exp(x))"}, F.softplus, _x),
    "softplus, log of exp plus 1": Case({"y": "log(exp(x) + 1)"}, F.softplus, _x),
    "softplus, relu idiom": Case({"y": "relu(x) + log1p(exp(-abs(x)))"}, F.softplus, _x),
    "softplus, max idiom": Case({"y": "max(x, 0) + log1p(exp(-abs(x)))"}, F.softplus, _x),
    "softplus, max and log idiom": Case({"y": "max(x, 0) + log(1 + exp(-abs(x)))"}, F.softplus, _x),
    "logaddexp written out": Case({"y": "log(exp(a) + exp(b))"}, torch.logaddexp, _ab, ("a", "b")),
    "logaddexp through where names": Case(
        {"y": "log(ea + eb)"},
        torch.logaddexp,
        _ab,
        ("a", "b"),
        where={"ea": "exp(a)", "eb": "exp(b)"},
    ),
    "logaddexp, max idiom": Case(
        {"y": "max(a, b) + log1p(exp(-abs(a - b)))"}, torch.logaddexp, _ab, ("a", "b")
    ),
    "logaddexp, the function": Case({"y": "logaddexp(a, b)"}, torch.logaddexp, _ab, ("a", "b")),
    "logsigmoid, min idiom": Case({"y": "min(x, 0) - log1p(exp(-abs(x)))"}, F.logsigmoid, _x),
    "logsigmoid, mirrored relu idiom": Case(
        {"y": "-(relu(-x) + log1p(exp(-abs(x))))"}, F.logsigmoid, _x
    ),
    "logsigmoid, negated softplus": Case({"y": "-softplus(-x)"}, F.logsigmoid, _x),
    "log1mexp, log of 1 - exp": Case({"y": "log(1 - exp(x))"}, _log1mexp, _negative),
    "log1mexp, log of -expm1": Case({"y": "log(-expm1(x))"}, _log1mexp, _negative),
    "log1mexp, log1p of -exp": Case({"y": "log1p(-exp(x))"}, _log1mexp, _negative),
    "log1mexp through a where name": Case(
        {"y": "log1p(-e)"}, _log1mexp, _negative, where={"e": "exp(x)"}
    ),
    "log1mexp, mirrored": Case({"y": "log(-expm1(-x))"}, lambda x: _log1mexp(-x), _positive),
    "log1mexp, the where form written out": Case(
        {"y": "where(x > -log(2), log(-expm1(x)), log1p(-exp(x)))"}, _log1mexp, _negative
    ),
    "log1mexp, the function": Case({"y": "log1mexp(x)"}, _log1mexp, _negative),
    "BCE with logits, the stable idiom": Case(
        {"y": "mean(relu(z) - z * t + log1p(exp(-abs(z))))"},
        F.binary_cross_entropy_with_logits,
        _zt,
        ("z", "t"),
    ),
    "logit of sigmoid, log of sigmoid": Case(
        {"y": "log(sigmoid(x)) - log(1 - sigmoid(x))"}, lambda x: x.clone(), _x
    ),
    "softplus difference": Case({"y": "2 * softplus(x) - 2 * softplus(-x)"}, lambda x: 2 * x, _x),
    "BCE with logits, max idiom": Case(
        {"y": "mean(max(z, 0) - z * t + log(1 + exp(-abs(z))))"},
        F.binary_cross_entropy_with_logits,
        _zt,
        ("z", "t"),
    ),
}


def _spec(name: str, case: Case, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "Idiom",
        "inputs": {
            n: {"type": "tensor", "shape": list(t.shape)}
            for n, t in zip(case.names, inputs, strict=True)
        },
        "outputs": case.outputs,
    }
    if case.where:
        spec["where"] = case.where
    return spec


def _weights(shape: torch.Size) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _loss_gradients(
    function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], create: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The output, and the gradients of a fixed weighting of it."""
    leaves = tuple(t.detach().requires_grad_() for t in inputs)
    out = function(*leaves)
    out = out[0] if isinstance(out, tuple) else out  # a Function may return saved extras
    loss = (out * _weights(out.shape).to(out.dtype)).sum()
    grads = torch.autograd.grad(loss, leaves, create_graph=create)
    return out, grads


def _scale(
    function: Callable[..., torch.Tensor], value: torch.Tensor, inputs: tuple[torch.Tensor, ...]
) -> torch.Tensor:
    """|q| + sum_i |dq/dx_i * x_i| for every element q of `function`'s value, in float64.

    An input exactly 0 adds nothing, also where dq/dx_i is infinite there (log1mexp at 0):
    autograd's 0 * inf would make every element's scale NaN.
    """
    jacobians = torch.autograd.functional.jacobian(function, inputs)
    total = value.abs()
    for jacobian, x in zip(jacobians, inputs, strict=True):
        terms = jacobian.reshape(value.numel(), x.numel()).abs() * x.abs().flatten()
        terms = torch.where(x.flatten() == 0, 0.0, terms)
        total = total + terms.sum(dim=1).reshape(value.shape)
    return total


def _quantities(
    function: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]
) -> list[Callable[..., torch.Tensor]]:
    """The forward and each input's gradient, as functions of the inputs."""

    def gradient(i: int) -> Callable[..., torch.Tensor]:
        return lambda *xs: _loss_gradients(function, xs, create=True)[1][i]

    return [function, *(gradient(i) for i in range(len(inputs)))]


@pytest.mark.parametrize("name", list(CASES))
def test_as_accurate_as_torch_at_extreme_points(name: str) -> None:
    case = CASES[name]
    exact_inputs = case.inputs()
    cls = symgrad.load(_spec(name, case, exact_inputs))
    single = tuple(t.float() for t in exact_inputs)
    ours = _loss_gradients(cls.apply, single, create=False)
    torch32 = _loss_gradients(case.reference, single, create=False)
    exact = _loss_gradients(case.reference, exact_inputs, create=False)
    quantities = _quantities(case.reference, exact_inputs)
    for k, (mine, theirs, want) in enumerate(
        zip((ours[0], *ours[1]), (torch32[0], *torch32[1]), (exact[0], *exact[1]), strict=True)
    ):
        finite = torch.isfinite(theirs)
        scale = _scale(quantities[k], want.detach(), exact_inputs)
        error = (mine.double() - want).abs()
        allowed = torch.maximum(4 * (theirs.double() - want).abs(), 1e-6 * scale)
        bad = finite & ~(torch.isfinite(mine) & (error <= allowed))
        what = "forward" if k == 0 else f"d/d{case.names[k - 1]}"
        at = [
            tuple(float(t.flatten()[i]) for t in exact_inputs)
            for i in bad.flatten().nonzero()[:3, 0]
        ]
        assert not bad.any(), f"{what} wrong at {int(bad.sum())} points, e.g. inputs {at}"


def _forward(formula: str, where: dict[str, str] | None = None, names: str = "xab") -> set[str]:
    """The names of the calls, reductions and normalizations in the derived forward."""
    spec: dict[str, Any] = {"name": "Case", "inputs": {n: "tensor" for n in names}}
    spec["outputs"] = {"y": formula}
    if where:
        spec["where"] = where
    found: set[str] = set()
    for assignment in derive(symgrad.spec_from_dict(spec)).forward:
        for node in sympy.preorder_traversal(assignment.expr):
            if isinstance(node, functions.ElementwiseFunction):
                found.add(type(node).__name__)
            elif isinstance(node, (reductions.Reduction, reductions.Normalization, piecewise.Kink)):
                found.add(getattr(node, "name", type(node).__name__))
            elif isinstance(node, piecewise.Where):
                found.add("where")
    return found


@pytest.mark.parametrize(
    ("formula", "where", "expected"),
    [
        ("ex / sum(ex, dim=-1, keepdim=True)", EX, {"softmax"}),
        ("ex / s", {**EX, "s": "sum(ex, dim=-1, keepdim=True)"}, {"softmax"}),
        ("log(ex / sum(ex, dim=-1, keepdim=True))", EX, {"log_softmax"}),
        ("exp(x - logsumexp(x, dim=-1, keepdim=True))", None, {"softmax"}),
        ("log(s)", {**EX, "s": "sum(ex, dim=-1)"}, {"logsumexp"}),
        ("log1p(exp(2 * x)) / 2", None, {"softplus"}),
        ("log(exp(a) + exp(b))", None, {"logaddexp"}),
        ("log(ea + eb)", {"ea": "exp(a)", "eb": "exp(b)"}, {"logaddexp"}),
        ("max(a, b) + log1p(exp(-abs(a - b)))", None, {"logaddexp"}),
        ("relu(x) + log1p(exp(-abs(x)))", None, {"softplus"}),
        ("max(x, 0) + log(1 + exp(-abs(x)))", None, {"softplus"}),
        ("min(x, 0) - log1p(exp(-abs(x)))", None, {"log_sigmoid"}),
        ("-softplus(-x)", None, {"log_sigmoid"}),
        ("log(1 - exp(x))", None, {"log1mexp"}),
        ("log(-expm1(x))", None, {"log1mexp"}),
        ("log1p(-exp(x))", None, {"log1mexp"}),
        ("log(1 - e)", {"e": "exp(x)"}, {"log1mexp"}),
        ("log(-m)", {"m": "expm1(2 * x)"}, {"log1mexp"}),
        ("log(1 - sigmoid(x))", None, {"log_sigmoid"}),
    ],
)
def test_rewrites_to_the_stable_primitive(
    formula: str, where: dict[str, str] | None, expected: set[str]
) -> None:
    assert _forward(formula, where) == expected


def test_an_intermediate_used_elsewhere_stays() -> None:
    """`ex` also feeds a second output: it stays named, and softmax reads x itself."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Case",
            "inputs": {"x": "tensor"},
            "where": EX,
            "outputs": {"y": "ex / sum(ex, dim=-1, keepdim=True)", "z": "2 * ex"},
        }
    )
    forward = {str(a.target): a.expr for a in derive(spec).forward}
    assert str(forward["ex"]) == "exp(x)"
    assert str(forward["z"]) == "2*ex"
    assert forward["y"].atoms(reductions.Normalization)


def test_the_user_factoring_stays_where_no_rule_applies() -> None:
    """A `where` name no pattern reads through is neither inlined nor renamed."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Case",
            "inputs": {"x": "tensor", "a": "tensor"},
            "where": {"u": "x + a", "s": "sum(exp(u), dim=-1)"},
            "outputs": {"y": "u * tanh(u) + log(s)"},
        }
    )
    forward = {str(a.target): a.expr for a in derive(spec).forward}
    assert str(forward["u"]) == "a + x"
    assert "u" in {str(s) for s in forward["y"].free_symbols}
