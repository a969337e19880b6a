"""The guard pass: no untaken `where` branch leaks NaN or inf into values or gradients.

Note [Untaken branches]: the gradient of where(x > 0, sqrt(x), 0) is finite at x <= 0
only if the untaken branch is never evaluated at x <= 0: a torch.where of two branch
gradients multiplies NaN by zero. Before differentiating, `guard_branches` rewrites every
branch that is not finite everywhere so that, where the condition does not select it, it
is evaluated at a safe point: sqrt(x) becomes sqrt(where(x > 0, x, 1)). The values are
unchanged where the branch is taken. The safe point is one where the branch's condition
holds, for the variables the condition and the branch share (x > lo gives x = lo + 1);
where no such point is found (the condition depends on values outside the branch, such
as an eps input in abs(alpha - 2) < eps, or reaches it through `where:` names), every
variable of the branch is set to a point at which the branch and its gradient evaluate to
finite numbers. Number inputs are guarded like tensors: a condition decided without
tensors prints as a torch.where (for the tensors' broadcast shape), so both branches run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean, BooleanAtom, BooleanTrue

from symgrad.language.contractions import Einsum
from symgrad.language.indexing import Gather, IndexSymbol, ScatterAdd
from symgrad.language.piecewise import Kink, Where, as_sympy
from symgrad.language.reductions import Reduction
from symgrad.language.scans import AlongDim
from symgrad.language.segments import IndexAdd, IndexSelect, SegmentSum
from symgrad.language.views import Cat, View

# Values tried, in order, when looking for a point that satisfies a condition.
_SAFE_CANDIDATES = (1, -1, 2, -2, sympy.Rational(1, 2), -sympy.Rational(1, 2), 0, 10, -10)


def guard_branches(expr: sympy.Expr, guarded: Iterable[sympy.Symbol]) -> sympy.Expr:
    """Rewrite every `Where` in `expr` so its branches are evaluated only where finite.

    `guarded` are the symbols that hold tensors; number inputs are guarded too (a number
    condition prints as a torch.where, which evaluates both branches). See Note
    [Untaken branches].
    """
    tensors = frozenset(guarded)
    if not expr.has(Where):
        return expr

    def visit(node: sympy.Basic) -> sympy.Basic:
        if not node.args:
            return node
        args = [visit(arg) for arg in node.args]
        if isinstance(node, Where):
            cond, a, b = args
            a = _guard(a, cond, tensors)
            b = _guard(b, sympy.Not(cond), tensors)
            return Where(cond, a, b)
        return node.func(*args) if args != list(node.args) else node

    result: sympy.Expr = visit(expr)
    return result


def _guard(branch: sympy.Expr, cond: Boolean, tensors: frozenset[sympy.Symbol]) -> sympy.Expr:
    """`branch` with its variables replaced, where `cond` is false, by a safe point."""
    if isinstance(cond, BooleanTrue):
        return branch
    stand_ins = _moving_stand_ins(branch)
    if stand_ins:
        inner = _guard(
            branch.xreplace(stand_ins), cond.xreplace(stand_ins), tensors | {*stand_ins.values()}
        )
        return inner.xreplace({symbol: node for node, symbol in stand_ins.items()})
    if _finite_everywhere(branch):
        return branch
    tensor_condition = bool(cond.free_symbols & tensors)
    # An integer number (polygamma's order) must stay a Python int: under a tensor
    # condition a where() would make it a tensor.
    # A contraction's operand keeps its own shape: a where() would broadcast it to the
    # condition's and change its rank (Note [Contractions] in symgrad.language.contractions).
    contracted = set().union(*(e.free_symbols for e in branch.atoms(Einsum)))
    variables = sorted(
        (
            v
            for v in branch.free_symbols - contracted
            if isinstance(v, sympy.Symbol)
            and not isinstance(v, IndexSymbol)  # positions, not a point of the formula
            and (v in tensors or not (tensor_condition and v.is_integer))
        ),
        key=str,
    )
    safe = _safe_point(branch, cond, variables, tensors)
    if not safe:
        return branch
    return branch.xreplace({v: Where(cond, v, value) for v, value in safe.items()})


# Nodes whose value's positions are not their arguments': a scan or sort moves values
# along its dim, a view or cat reads them in another shape, a gather, scatter,
# index_select or index_add moves them by an index, a segment sum or maximum gathers them
# into segments (the index must stay an index, never a where), a reduction has fewer dims
# than its argument (a per-row condition beside a row's sum).
_MOVING = (
    AlongDim,
    View,
    Cat,
    Gather,
    ScatterAdd,
    SegmentSum,
    IndexSelect,
    IndexAdd,
    Reduction,
)


def _moving_stand_ins(branch: sympy.Expr) -> dict[sympy.Basic, sympy.Symbol]:
    """A symbol for each outermost scan, sort, view, cat or gather in `branch`, guarded
    as a whole.

    Such a node moves values to other positions, or to another shape, so the condition's
    positions are not its argument's: guarding the argument's variables would read the
    safe point where the condition holds, and broadcast them to the condition's shape
    (unsqueeze(w, 0) under a condition of shape [1] read a w of shape [1], not 0-d). The
    node's value is aligned with the condition, so it is what gets guarded (Note [Scans
    and sort] in symgrad.language.scans, Note [Views] in symgrad.language.views).
    """
    found: dict[sympy.Basic, sympy.Symbol] = {}
    pending = [branch]
    while pending:
        node = pending.pop()
        if isinstance(node, _MOVING):
            found.setdefault(node, sympy.Dummy(f"moved{len(found)}", real=True))
        else:
            pending.extend(node.args)
    return found


def _safe_point(
    branch: sympy.Expr,
    cond: Boolean,
    variables: list[sympy.Symbol],
    tensors: frozenset[sympy.Symbol],
) -> dict[sympy.Symbol, Any]:
    """Values for some of `variables` at which `branch` is finite, with its gradient.

    Where every variable of the branch appears in `cond`, a point where `cond` holds
    (the branch is finite wherever it is selected, as the user wrote it); the tensors
    alone first, then the numbers with them. Otherwise (the branch also reads values the
    condition does not, which may be computed from the condition's: `where:` names, the
    forward's shared temporaries), every variable of the branch is set to a point at
    which the branch and its first derivatives evaluate to finite numbers.
    """
    if not variables:
        return {}
    shared = [v for v in variables if v in cond.free_symbols]
    if len(shared) == len(variables):
        for subset in ([v for v in shared if v in tensors], shared):
            if subset:
                point = _satisfying_point(cond, subset)
                if point is not None:
                    return point
    fallback: dict[sympy.Symbol, Any] | None = None
    for values in _assignments(_SAFE_CANDIDATES, len(variables)):
        point = {v: sympy.sympify(value) for v, value in zip(variables, values, strict=True)}
        finite = _finite_at(branch, point)
        if finite:
            return point
        if finite is None and fallback is None:
            fallback = point
    return fallback or {v: sympy.Integer(1) for v in variables}


# At most this many points are tried per search.
_MAX_POINTS = 96


def _assignments(candidates: Sequence[Any], count: int) -> Iterator[tuple[Any, ...]]:
    """Tuples of `count` candidates: the same value everywhere first, then mixed ones."""
    for value in candidates:
        yield (value,) * count
    if count > 1:
        mixed = (t for t in itertools.product(candidates, repeat=count) if len(set(t)) > 1)
        yield from itertools.islice(mixed, _MAX_POINTS)


# Functions that are finite with finite derivatives for every finite argument.
# A contraction (Einsum) is a polynomial of its operands: finite wherever they are.
_EVERYWHERE_FINITE = frozenset(
    {"sin", "cos", "tanh", "sigmoid", "atan", "erf", "erfc", "sign", "Einsum"}
)


def _finite_everywhere(expr: sympy.Basic) -> bool:
    """True for polynomials of bounded functions, which need no guard."""
    if expr.is_Atom:
        return True
    if isinstance(expr, Where):  # finite wherever its branches are
        return all(_finite_everywhere(branch) for branch in expr.args[1:])
    if isinstance(expr, Kink):  # relu, max, min, clamp: finite wherever their arguments are
        return all(_finite_everywhere(arg) for arg in expr.args)
    if isinstance(expr, sympy.Pow):
        exponent = expr.exp
        if not (exponent.is_Integer and exponent >= 0):
            return False
    elif isinstance(expr, sympy.Function):
        if type(expr).__name__ not in _EVERYWHERE_FINITE:
            return False
    elif not isinstance(expr, (sympy.Add, sympy.Mul)):
        return False
    return all(_finite_everywhere(arg) for arg in expr.args)


def _satisfying_point(
    cond: Boolean, variables: list[sympy.Symbol]
) -> dict[sympy.Symbol, Any] | None:
    """Values for `variables` under which `cond` is true, if a simple search finds them."""
    decidable = as_sympy(cond)  # here sympy may use its assumptions: any true point will do
    for values in _assignments(_candidates(decidable, variables), len(variables)):
        point = dict(zip(variables, values, strict=True))
        if _holds(decidable, point):
            return point
    return None


def _holds(cond: sympy.Basic, point: dict[sympy.Symbol, Any]) -> bool:
    """True when sympy decides that `cond` holds at `point` (NaN, 0/0, decides nothing)."""
    try:
        return isinstance(cond.xreplace(point), BooleanTrue)
    except TypeError:  # sympy refuses to order NaN or complex numbers
        return False


def _candidates(cond: sympy.Basic, variables: list[sympy.Symbol]) -> list[Any]:
    """Constants, and points next to the other side of each comparison (x > lo -> lo + 1)."""
    found: list[Any] = list(_SAFE_CANDIDATES)
    for relation in cond.atoms(Relational):
        for side in relation.args:
            if not side.free_symbols & set(variables):
                found += [side + 1, side - 1, side]
    return found


def _finite_at(branch: sympy.Expr, point: dict[sympy.Symbol, Any]) -> bool | None:
    """Whether `branch` and its gradient are finite at `point`, by torch in float64.

    None when the branch cannot be evaluated at a point (it has other symbols, or parts
    that are not elementwise).
    """
    import torch  # the generator's own dependency; only needed on this path

    leaves = {v: torch.tensor(float(value), dtype=torch.float64) for v, value in point.items()}
    for leaf in leaves.values():
        leaf.requires_grad_()
    try:
        with torch.enable_grad():
            value = _evaluate(branch, leaves)
            if value is None:
                return None
            if not value.requires_grad:
                return bool(torch.isfinite(value).all())
            grads = torch.autograd.grad(value.sum(), list(leaves.values()), allow_unused=True)
    except (TypeError, ValueError, RuntimeError, OverflowError, ZeroDivisionError):
        return None
    parts = [value.detach(), *(g for g in grads if g is not None)]
    return all(bool(torch.isfinite(part).all()) for part in parts)


def _evaluate(expr: sympy.Basic, leaves: dict[sympy.Symbol, Any]) -> Any:
    """`expr` as a torch value at `leaves`, or None for what this cannot evaluate."""
    import torch

    from symgrad.language import functions

    if expr in leaves:
        return leaves[expr]
    if isinstance(expr, BooleanAtom):
        return torch.tensor(bool(expr))
    if expr.is_number and not isinstance(expr, (sympy.Function, Relational)):
        try:
            number = float(expr)
        except TypeError:  # complex or undefined
            return torch.tensor(float("nan"), dtype=torch.float64)
        return torch.tensor(number, dtype=torch.float64)
    if isinstance(expr, Kink):
        return _evaluate(expr.expanded(), leaves)
    if isinstance(expr, functions.ElementwiseFunction):
        info = functions.FUNCTIONS[type(expr).__name__]
        if info.torch_function is None:  # torch has no such function: its definition
            assert info.definition is not None
            return _evaluate(info.definition(*expr.args), leaves)
        target: Any = torch
        *path, last = info.torch_function.split(".")[1:] or [""]
        for name in path:
            target = getattr(target, name)
        function = getattr(target, last)
        if info.name == "polygamma":
            if not expr.args[0].is_Integer:
                return None
            x = _evaluate(expr.args[1], leaves)
            return None if x is None else function(int(expr.args[0]), x)
        args = [_evaluate(arg, leaves) for arg in expr.args]
        return None if any(a is None for a in args) else function(*args)
    args = [_evaluate(arg, leaves) for arg in expr.args]
    if any(a is None for a in args):
        return None
    if isinstance(expr, sympy.Add):
        return sum(args[1:], args[0])
    if isinstance(expr, sympy.Mul):
        result = args[0]
        for arg in args[1:]:
            result = result * arg
        return result
    if isinstance(expr, sympy.Pow):
        return torch.pow(args[0], args[1])
    if isinstance(expr, Where):
        return torch.where(*args)
    if isinstance(expr, Relational):
        return _TORCH_COMPARISONS[expr.rel_op](*args)
    if isinstance(expr, sympy.Not):
        return ~args[0]
    if isinstance(expr, (sympy.And, sympy.Or)):
        result = args[0]
        for arg in args[1:]:
            result = (result & arg) if isinstance(expr, sympy.And) else (result | arg)
        return result
    return None


_TORCH_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
