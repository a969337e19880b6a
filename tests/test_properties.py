"""Property tests: random formulas over the whole spec language, and random spec dicts.

`test_generated_function_matches_torch` draws formulas over two tensors x, y and a float
c (with a default) from the whole expression language: numbers, arithmetic, small integer
powers, the smooth and special functions (on arguments that keep them in their domain),
the kinked ones (relu, abs, sign, max, min, clamp, floor, ceil, round), `where` with
conditions built from comparisons and and/or/not, the classic NaN traps of untaken
branches (`where(u > 0, sqrt(u), 0)`), outputs marked `differentiable: false` and
`gradients:` overrides. Each spec either fails with `SpecError` or is generated, imported
and checked in float64 against the same strings evaluated by a small torch interpreter
here (independent of symgrad's parser and printer), whose derivatives come from torch's
forward-mode AD (which selects the taken branch of `torch.where`, so untaken branches
cannot poison the reference):

- the values agree (at points that are not near a kink or a branch boundary);
- the gradients are finite wherever the reference value and derivative are finite and
  moderate, kinks and boundaries included (no NaN leaks from untaken branches);
- away from kinks and boundaries (more than MARGIN, and no decision changes within
  gradcheck's step) the gradients equal the reference's, and gradcheck and gradgradcheck
  pass.

`test_arbitrary_spec_dicts` feeds `spec_from_dict` and `generate` random, mostly malformed
or hostile dicts: they either succeed (and the generated code compiles, imports and runs
forward and backward) or raise `SpecError`, quickly.

SYMGRAD_FUZZ_EXAMPLES sets the number of examples of each property (default 25, for CI).
The examples are derandomized, so CI is deterministic; set SYMGRAD_FUZZ_SEED to an integer
to draw other examples.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import itertools
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
import sympy
import torch
import torch.autograd.forward_ad as forward_ad
from hypothesis import HealthCheck, assume, example, given, seed, settings
from hypothesis import strategies as st

import symgrad
from symgrad import functions
from symgrad.model import Spec

FUZZ_EXAMPLES = int(os.environ.get("SYMGRAD_FUZZ_EXAMPLES", "25"))
FUZZ_SEED = os.environ.get("SYMGRAD_FUZZ_SEED")

C_DEFAULT = 0.3
# Each case runs with c at its default and with c passed explicitly.
C_VALUES = (C_DEFAULT, -0.8)
# Largest |value| or |derivative| a point may reach to be checked: gradcheck's finite
# differences are exact enough below it (3**12 + x * y / 100 would fail through rounding).
MAX_MAGNITUDE = 1e3
# Points closer than this to a kink or branch boundary are not compared or gradchecked.
MARGIN = 1e-3
# gradcheck's step: no decision of the formula may change within it at a checked point.
STEP = 1e-6
# Coefficient of the x * y term added to the first output, so both tensors get a gradient.
TIE = 0.0123
# Random points per case, then points on a grid that hit the traps' edge cases (u == 0).
RANDOM_POINTS = 32
GRID = (-1.0, 0.0, 0.5, 1.0)
# Fewest points a case must keep; most points gradcheck and gradgradcheck look at.
MIN_POINTS = 3
MAX_GRADCHECK_POINTS = 8

_T = TypeVar("_T")


def fuzz_settings(**overrides: Any) -> Callable[[_T], _T]:
    """Bounded, deterministic settings for CI; SYMGRAD_FUZZ_SEED explores other examples."""

    def decorate(test: _T) -> _T:
        configured = settings(
            max_examples=FUZZ_EXAMPLES,
            derandomize=FUZZ_SEED is None,
            database=None,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.filter_too_much,
            ],
            **{"deadline": None, **overrides},
        )(test)
        return configured if FUZZ_SEED is None else seed(int(FUZZ_SEED))(configured)

    return decorate


# --- The grammar ---------------------------------------------------------------------

# Templates: {0}, {1}, {2} are drawn subexpressions. Each keeps its function in its domain.
SMOOTH = (
    "exp(tanh({0}))",
    "e**tanh({0})",
    "sin({0})",
    "cos({0})",
    "tan(tanh({0}))",
    "tanh({0})",
    "sinh(tanh({0}))",
    "cosh(tanh({0}))",
    "sigmoid({0})",
    "softplus({0})",
    "log_sigmoid({0})",
    "log(1 + ({0})**2)",
    "log1p(({0})**2)",
    "expm1(tanh({0}))",
    "sqrt(1 + ({0})**2)",
    "rsqrt(1 + ({0})**2)",
    "asin(0.9 * tanh({0}))",
    "acos(0.9 * tanh({0}))",
    "atan({0})",
    "asinh({0})",
    "atanh(0.9 * tanh({0}))",
    "erf({0})",
    "erfc({0})",
    "-({0})",
    "pi * ({0})",
    "({0}) + ({1})",
    "({0}) - ({1})",
    "({0}) * ({1})",
    "({0}) / ({1})",
    "({0}) / (1 + ({1})**2)",
    "({0}) / (2 + sin({1}))",
    "({0}) / sigmoid(tanh({1}))",
    "({0})**2",
    "({0})**3",
    "({0})**-1",
    "(1 + ({0})**2)**-2",
)
SPECIAL = (
    "lgamma(1 + ({0})**2)",
    "digamma(1 + ({0})**2)",
    "polygamma(1, 1 + ({0})**2)",
    "erfinv(0.5 * tanh({0}))",
    "logit(sigmoid({0}))",
    "logit(0.25 + 0.5 * sigmoid({0}))",
    "xlogy({0}, 1 + ({1})**2)",
    "xlog1py({0}, ({1})**2)",
    "hypot({0}, {1})",
    "atan2({0}, {1})",
)
KINKED = (
    "relu({0})",
    "abs({0})",
    "sign({0})",
    "max({0}, {1})",
    "min({0}, {1})",
    "clamp({0}, -1, 1)",
    "clamp({0}, {1}, {2})",
    "floor({0})",
    "ceil({0})",
    "round({0})",
    "acosh(1 + ({0})**2)",
)
# Branches that are NaN or infinite where their condition does not hold.
TRAPS = (
    "where(({0}) > 0, sqrt({0}), {1})",
    "where(({0}) != 0, sin({0}) / ({0}), 1)",
    "where(({0}) > 0, log({0}), {1})",
    "where(({0}) <= 0, {1}, sqrt({0}))",
    "where(not (({0}) > 0), {1}, log({0}))",
    "where(({0}) > 0, ({0}) * log({0}), 0)",
    "where(({0}) > 0, rsqrt({0}), {1})",
    "where(({0}) > 0, ({0})**0.5, {1})",
    "where(({0}) >= 0.5, 1 / ({0}), {1})",
    "where(({0}) < 0, log(-({0})), {1})",
    "where(({0}) > 1, acosh({0}), {1})",
    "where(-1 < ({0}) < 1, atanh({0}), {1})",
    "where(({0}) > -1 and ({0}) < 1, asin({0}), {1})",
    "where(({0}) > 0 and ({0}) < 1, logit({0}), {1})",
    "where(({0}) > 0, digamma({0}), {1})",
    "where(({0}) > 0, xlogy({1}, {0}), {1})",
    "where(({0}) > 0 and ({1}) > 0, log({0}) + sqrt({1}), 0)",
    "where(({0}) > 0 or ({1}) > 1, sqrt(({0}) + ({1})), {1})",
)
COMPARISONS = ("<", "<=", ">", ">=", "<", "<=", ">", ">=", "==", "!=")


def _arity(template: str) -> int:
    return max(int(index) for index in "012" if f"{{{index}}}" in template) + 1


def _templates(
    templates: tuple[str, ...], inner: st.SearchStrategy[str]
) -> st.SearchStrategy[str]:
    """Calls of `templates` on subexpressions drawn from `inner`, one strategy per arity."""
    by_arity: dict[int, list[str]] = {}
    for template in templates:
        by_arity.setdefault(_arity(template), []).append(template)
    return st.one_of(
        *(
            st.builds(lambda t, *args: t.format(*args), st.sampled_from(group), *[inner] * n)
            for n, group in sorted(by_arity.items())
        )
    )


def conditions(values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Comparisons of `values` (chains too), combined with and, or and not."""
    comparison = st.builds(
        lambda a, op, b: f"({a}) {op} ({b})", values, st.sampled_from(COMPARISONS), values
    )
    chain = st.builds(
        lambda a, op, b, op2, c: f"({a}) {op} ({b}) {op2} ({c})",
        values,
        st.sampled_from(["<", "<="]),
        values,
        st.sampled_from(["<", "<="]),
        values,
    )
    return st.recursive(
        comparison | chain,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
            st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
            st.builds(lambda a: f"not ({a})", inner),
        ),
        max_leaves=3,
    )


def expressions(names: tuple[str, ...], max_leaves: int = 8) -> st.SearchStrategy[str]:
    """Expression strings over `names` from the whole language."""
    leaves = st.sampled_from([*names, "2", "0.5", "3", "0", "pi"])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            _templates(SMOOTH, inner),
            _templates(SPECIAL, inner),
            _templates(KINKED, inner),
            st.builds(lambda c, a, b: f"where({c}, {a}, {b})", conditions(inner), inner, inner),
            _templates(TRAPS, inner),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


@dataclass(frozen=True)
class Case:
    """One random spec: an optional `where` value u, one or two outputs (the second maybe
    marked `differentiable: false`), an optional override of d out0 / dx, and the seed of
    the random points it is checked at."""

    where: str | None
    outputs: tuple[str, ...]
    nondifferentiable: bool = False
    override: str | None = None
    seed: int = 0

    def differentiable(self, index: int) -> bool:
        return not (self.nondifferentiable and index == 1)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    names = ("x", "y", "c")
    where = draw(st.none() | expressions(names))
    if where is not None:
        names += ("u",)
    outputs = draw(st.lists(expressions(names), min_size=1, max_size=2))
    # Both tensors get a gradient (no constant of the grammar can cancel this term);
    # inputs without one are covered by test_tensor_input_without_gradient.
    outputs[0] = f"{outputs[0]} + {TIE} * x * y"
    nondifferentiable = len(outputs) == 2 and draw(st.sampled_from([False, False, True]))
    override = draw(st.none() | st.none() | st.none() | expressions((*names, "out0"), 4))
    return Case(where, tuple(outputs), nondifferentiable, override, draw(st.integers(0, 99)))


def spec_dict(case: Case, name: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "inputs": {
            "x": "tensor",
            "y": "tensor",
            "c": {"type": "float", "default": C_DEFAULT},
        },
    }
    if case.where is not None:
        data["where"] = {"u": case.where}
    data["outputs"] = {
        f"out{k}": text if case.differentiable(k) else {"expr": text, "differentiable": False}
        for k, text in enumerate(case.outputs)
    }
    if case.override is not None:
        data["gradients"] = {"out0": {"x": case.override}}
    return data


# --- An independent evaluation of the strings with torch -------------------------------

Tensor = torch.Tensor
Kinks = Callable[..., list[tuple[Tensor, Tensor | None]]]


def _near_integer(a: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    return [((a - torch.round(a)).abs(), torch.floor(a))]


def _zero_at(a: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    return [(a.abs(), torch.sign(a))]


def _tie(a: Tensor, b: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    return [((a - b).abs(), torch.sign(a - b))]


def _clamp_kinks(a: Tensor, low: Tensor, high: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    return [*_tie(a, low), *_tie(a, high), *_tie(low, high)]


def _atan2_kinks(a: Tensor, b: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    """atan2(a, b) jumps across a == 0 where b < 0, and has no derivative at the origin."""
    cut = torch.where(b < 0, a.abs(), math.inf)
    return [(torch.hypot(a, b), None), (cut, torch.where(b < 0, torch.sign(a), 0))]


# The language's functions as plain torch, and where each has a kink or a jump: a list of
# (distance from it, which side) per call.
TORCH_FUNCTIONS: dict[str, tuple[Callable[..., Tensor], Kinks | None]] = {
    "exp": (torch.exp, None),
    "log": (torch.log, None),
    "log1p": (torch.log1p, None),
    "expm1": (torch.expm1, None),
    "sqrt": (torch.sqrt, None),
    "rsqrt": (torch.rsqrt, None),
    "sin": (torch.sin, None),
    "cos": (torch.cos, None),
    "tan": (torch.tan, None),
    "tanh": (torch.tanh, None),
    "sinh": (torch.sinh, None),
    "cosh": (torch.cosh, None),
    "asin": (torch.asin, None),
    "acos": (torch.acos, None),
    "atan": (torch.atan, None),
    "asinh": (torch.asinh, None),
    "acosh": (torch.acosh, lambda a: [((a - 1).abs(), None)]),
    "atanh": (torch.atanh, None),
    "sigmoid": (torch.sigmoid, None),
    "softplus": (torch.nn.functional.softplus, None),
    "log_sigmoid": (torch.nn.functional.logsigmoid, None),
    "abs": (torch.abs, _zero_at),
    "sign": (torch.sign, _zero_at),
    "erf": (torch.erf, None),
    "erfc": (torch.erfc, None),
    "erfinv": (torch.erfinv, None),
    "lgamma": (torch.lgamma, None),
    "digamma": (torch.digamma, None),
    "xlogy": (torch.xlogy, None),
    "xlog1py": (torch.special.xlog1py, None),
    "logit": (torch.logit, None),
    "hypot": (torch.hypot, lambda a, b: [(torch.hypot(a, b), None)]),
    "atan2": (torch.atan2, _atan2_kinks),
    "floor": (torch.floor, _near_integer),
    "ceil": (torch.ceil, _near_integer),
    "round": (torch.round, lambda a: [((a - torch.floor(a) - 0.5).abs(), torch.round(a))]),
    "relu": (torch.relu, _zero_at),
    "max": (torch.maximum, _tie),
    "min": (torch.minimum, _tie),
    "clamp": (torch.clamp, _clamp_kinks),
}
CONSTANTS = {"pi": math.pi, "e": math.e}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Tensor]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Tensor, Tensor], Tensor]] = {
    ast.Lt: torch.lt,
    ast.LtE: torch.le,
    ast.Gt: torch.gt,
    ast.GtE: torch.ge,
    ast.Eq: torch.eq,
    ast.NotEq: torch.ne,
}


def _number(value: float) -> Tensor:
    return torch.tensor(float(value), dtype=torch.float64)


class Evaluation:
    """Evaluates expression strings of the grammar above with torch, elementwise.

    Each kink, jump and comparison met is recorded: its distance (|lhs - rhs|, |x| for
    relu(x), ...) and the side taken, so that points near one can be set aside.
    """

    def __init__(self, names: Mapping[str, Any]) -> None:
        self.names = dict(names)
        self.distances: list[Tensor] = []
        self.sides: list[Tensor | None] = []

    def __call__(self, text: str) -> Tensor:
        return self.visit(ast.parse(text.strip(), mode="eval").body)

    def kink(self, distance: Tensor, side: Tensor | None) -> None:
        self.distances.append(distance)
        self.sides.append(side)

    def visit(self, node: ast.AST) -> Tensor:
        if isinstance(node, ast.Constant):
            return _number(node.value)
        if isinstance(node, ast.Name):
            value = self.names[node.id] if node.id in self.names else CONSTANTS[node.id]
            return value if isinstance(value, Tensor) else _number(value)
        if isinstance(node, ast.UnaryOp):
            operand = self.visit(node.operand)
            if isinstance(node.op, ast.Not):
                return ~operand
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            left = self.visit(node.left)
            if isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant | ast.UnaryOp):
                return left ** float(ast.literal_eval(node.right))
            return _BINARY[type(node.op)](left, self.visit(node.right))
        if isinstance(node, ast.BoolOp):
            combine = torch.logical_and if isinstance(node.op, ast.And) else torch.logical_or
            values = [self.visit(value) for value in node.values]
            result = values[0]
            for value in values[1:]:
                result = combine(result, value)
            return result
        if isinstance(node, ast.Compare):
            return self.compare(node)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), ast.dump(node)
        name = node.func.id
        if name == "where":
            cond, a, b = (self.visit(arg) for arg in node.args)
            return torch.where(cond, a, b)
        if name == "polygamma":
            order = ast.literal_eval(node.args[0])
            return torch.special.polygamma(order, self.visit(node.args[1]))
        args = [self.visit(arg) for arg in node.args]
        function, kinks = TORCH_FUNCTIONS[name]
        for distance, side in kinks(*args) if kinks else []:
            self.kink(distance, side)
        return function(*args)

    def compare(self, node: ast.Compare) -> Tensor:
        operands = [self.visit(node.left), *(self.visit(item) for item in node.comparators)]
        result = torch.tensor(True)
        for left, operator, right in zip(operands, node.ops, operands[1:], strict=False):
            holds = _COMPARE[type(operator)](left, right)
            gap = (left - right).abs()
            if isinstance(operator, ast.Eq | ast.NotEq):
                # Sides equal on a whole region (floor(x) == 0) are no boundary; an
                # isolated equality shows up as a side that changes within a step.
                gap = torch.where(gap == 0, math.inf, gap)
            self.kink(gap, holds)
            result = result & holds
        return result


@dataclass
class Reference:
    """The plain formula at some points: outputs, derivatives and where its kinks lie."""

    outputs: list[Tensor]
    # d output / d x and d output / d y for each output (zeros where it does not depend).
    derivatives: list[tuple[Tensor, Tensor]]
    override: Tensor | None
    distances: list[Tensor]
    sides: list[Tensor | None]


def evaluate(case: Case, x: Tensor, y: Tensor, c: float) -> Evaluation:
    """Run the strings of `case`; the outputs are `out0`, `out1`, ... of the result."""
    evaluation = Evaluation({"x": x, "y": y, "c": c})
    if case.where is not None:
        evaluation.names["u"] = evaluation(case.where)
    for k, text in enumerate(case.outputs):
        evaluation.names[f"out{k}"] = torch.broadcast_to(evaluation(text), x.shape)
    if case.override is not None:
        evaluation.names["override"] = torch.broadcast_to(evaluation(case.override), x.shape)
    return evaluation


def reference(case: Case, x: Tensor, y: Tensor, c: float) -> Reference:
    """Values, and derivatives by torch's forward-mode AD (it selects the taken branch of
    torch.where, so a NaN in an untaken branch does not leak into the reference)."""
    x, y = x.detach(), y.detach()
    names = [f"out{k}" for k in range(len(case.outputs))]
    tangents = []
    for wrt in "xy":
        with forward_ad.dual_level():
            one = torch.ones_like(x)
            dual_x = forward_ad.make_dual(x, one) if wrt == "x" else x
            dual_y = forward_ad.make_dual(y, one) if wrt == "y" else y
            evaluation = evaluate(case, dual_x, dual_y, c)
            parts = [forward_ad.unpack_dual(evaluation.names[n]) for n in names]
            tangents.append([torch.zeros_like(x) if p.tangent is None else p.tangent for p in parts])
    values = [forward_ad.unpack_dual(evaluation.names[n]).primal for n in names]
    override = evaluation.names.get("override")
    return Reference(
        values,
        list(zip(tangents[0], tangents[1], strict=True)),
        None if override is None else forward_ad.unpack_dual(override).primal,
        [forward_ad.unpack_dual(d).primal for d in evaluation.distances],
        [None if s is None else forward_ad.unpack_dual(s).primal for s in evaluation.sides],
    )


@dataclass
class Points:
    """Where a case is checked, for one value of c."""

    x: Tensor
    y: Tensor
    # The reference's value and derivatives are finite and moderate.
    moderate: Tensor
    # ... and no kink or boundary is within MARGIN (values compare exactly).
    away: Tensor
    # ... and no decision changes within gradcheck's step (gradients compare, gradcheck).
    smooth: Tensor


def _same(a: Tensor | None, b: Tensor | None) -> Tensor:
    if a is None or b is None:
        return torch.tensor(True)
    return (a == b) | (a.isnan() & b.isnan())


def _moderate(value: Tensor) -> Tensor:
    return value.isfinite() & (value.abs() <= MAX_MAGNITUDE)


def sample_points(case: Case, c: float) -> Points:
    generator = torch.Generator().manual_seed(case.seed)
    grid_x, grid_y = (g.flatten() for g in torch.tensor(GRID).double().meshgrid(*[torch.tensor(GRID).double()], indexing="ij")) if False else (None, None)
    del grid_x, grid_y
    grid = torch.tensor(list(itertools.product(GRID, GRID)), dtype=torch.float64)
    random = 4 * torch.rand((RANDOM_POINTS, 2), generator=generator, dtype=torch.float64) - 2
    x, y = torch.cat([random, grid]).unbind(1)
    ref = reference(case, x, y, c)
    moderate = torch.ones_like(x, dtype=torch.bool)
    for k, value in enumerate(ref.outputs):
        moderate &= _moderate(value)
        if case.differentiable(k):
            for derivative in ref.derivatives[k]:
                moderate &= _moderate(derivative)
    if ref.override is not None:
        moderate &= _moderate(ref.override)
    away = moderate.clone()
    for distance in ref.distances:
        away &= ~(distance < MARGIN)
    smooth = away.clone()
    for shifted in (
        evaluate(case, x + STEP, y, c),
        evaluate(case, x - STEP, y, c),
        evaluate(case, x, y + STEP, c),
        evaluate(case, x, y - STEP, c),
    ):
        for side, other in zip(ref.sides, shifted.sides, strict=True):
            smooth &= _same(side, other)
    return Points(x, y, moderate, away, smooth)
