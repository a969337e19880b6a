"""Conditional values: `where(cond, a, b)` and the kinked functions built on it.

One node, `Where`, carries every conditional. relu, max, min and clamp are written with
it so that their gradients follow torch's conventions by construction:

- relu(x) = where(x > 0, x, 0): the gradient at 0 is 0, as for torch.relu;
- max(a, b) = where(a > b, a, where(a < b, b, (a + b) / 2)): at a tie each side gets
  half the gradient, as torch.maximum gives it (min likewise);
- clamp(x, lo, hi) = where(x < lo, lo, where(x > hi, hi, x)): x gets the gradient on
  the closed interval, boundaries included, as torch.clamp gives it.

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
from typing import Any, ClassVar

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import Boolean, BooleanAtom, BooleanFalse, BooleanTrue

# --- Note [Conditions are never folded] -------------------------------------------------
#
# sympy decides comparisons from its assumptions as soon as they are built or rebuilt:
# Eq(x, x) is True, Ne(x, x) False, x**2 >= 0 True for a real x, not (x > 0) becomes
# x <= 0 and (x > 0 or x <= 0) True. All of these are wrong for a tensor that holds NaN
# (`x != x` is the NaN test), so the language's comparisons are the classes below: they
# are decided only between numbers, negate an ordering as `not` (NaN > 0 and NaN <= 0 are
# both false), and stay themselves when an expression is rebuilt (xreplace, cse).


class _Comparison(Relational):
    """A comparison that sympy decides only when both sides are numbers."""

    __slots__ = ()

    # The sympy class this one stands for (how it is decided between numbers).
    _sympy: type[Relational]

    def __new__(cls, lhs: Any, rhs: Any, **options: Any) -> Any:
        lhs, rhs = sympy.sympify(lhs), sympy.sympify(rhs)
        if not (lhs.free_symbols or rhs.free_symbols):
            try:
                decided = cls._sympy(lhs, rhs)
            except TypeError:  # NaN or a complex number: torch compares them as false
                decided = None
            if isinstance(decided, BooleanAtom):
                return decided
        return Relational.__new__(cls, lhs, rhs)

    @property
    def reversed(self) -> Relational:
        result: Relational = _MIRRORED[type(self)](self.rhs, self.lhs)
        return result

    @property
    def reversedsign(self) -> Relational:
        result: Relational = _MIRRORED[type(self)](-self.lhs, -self.rhs)
        return result

    @property
    def negated(self) -> Boolean:
        if type(self) in _NEGATED:
            result: Boolean = _NEGATED[type(self)](*self.args)
            return result
        return NotComparison(self, evaluate=False)

    @property
    def weak(self) -> Relational:
        return self

    @property
    def strict(self) -> Relational:
        return self

    def as_sympy(self) -> Relational:
        """The same comparison as sympy's own class (decided from assumptions)."""
        result: Relational = self._sympy(*self.args)
        return result


class Gt(_Comparison, sympy.StrictGreaterThan):
    __slots__ = ()
    _sympy = sympy.StrictGreaterThan


class Ge(_Comparison, sympy.GreaterThan):
    __slots__ = ()
    _sympy = sympy.GreaterThan


class Lt(_Comparison, sympy.StrictLessThan):
    __slots__ = ()
    _sympy = sympy.StrictLessThan


class Le(_Comparison, sympy.LessThan):
    __slots__ = ()
    _sympy = sympy.LessThan


class Eq(_Comparison, sympy.Equality):
    __slots__ = ()
    _sympy = sympy.Equality


class Ne(_Comparison, sympy.Unequality):
    __slots__ = ()
    _sympy = sympy.Unequality


class NotComparison(sympy.Not):
    """`not (a < b)`, kept as written: for NaN it is not `a >= b` (Note [Conditions ...])."""

    @property
    def canonical(self) -> Boolean:  # sympy's And and Or ask every argument for it
        return self


_MIRRORED: dict[type[Relational], type[_Comparison]] = {
    Gt: Lt,
    Ge: Le,
    Lt: Gt,
    Le: Ge,
    Eq: Eq,
    Ne: Ne,
}
_NEGATED: dict[type[Relational], type[_Comparison]] = {Eq: Ne, Ne: Eq}

# sympy's comparison classes -> the language's.
COMPARISONS: dict[type[Relational], type[_Comparison]] = {
    sympy.StrictGreaterThan: Gt,
    sympy.GreaterThan: Ge,
    sympy.StrictLessThan: Lt,
    sympy.LessThan: Le,
    sympy.Equality: Eq,
    sympy.Unequality: Ne,
    **{cls: cls for cls in (Gt, Ge, Lt, Le, Eq, Ne)},
}


def compare(relation: type[Relational], lhs: sympy.Expr, rhs: sympy.Expr) -> Boolean:
    """`lhs <relation> rhs` as a language comparison (never folded on symbols)."""
    result: Boolean = COMPARISONS[relation](lhs, rhs)
    return result


def as_sympy(cond: sympy.Basic) -> sympy.Basic:
    """`cond` with sympy's own comparisons, which sympy decides from the assumptions."""
    return cond.replace(
        lambda node: isinstance(node, (_Comparison, NotComparison)),
        lambda node: (
            node.as_sympy() if isinstance(node, _Comparison) else sympy.Not(node.args[0])
        ),
    )


class Where(sympy.Function):
    """`a` where `cond` holds, else `b` (elementwise; torch.where)."""

    nargs = 3

    @classmethod
    def eval(cls, cond: Any, a: Any, b: Any) -> Any:
        # A decided condition picks its branch, unless the other one depends on values:
        # torch.where(True, x, w) still has the broadcast shape and dtype of x and w.
        if isinstance(cond, BooleanTrue) and not sympy.sympify(b).free_symbols:
            return a
        if isinstance(cond, BooleanFalse) and not sympy.sympify(a).free_symbols:
            return b
        # Equal branches fold only under a decided condition: a condition on tensors
        # broadcasts the result to its shape (where(x > 0, k, k) has x's shape). Zero
        # branches fold always: derivatives are full of them, and a zero term adds nothing.
        if a == b and (a == 0 or not getattr(cond, "free_symbols", None)):
            return a
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def condition(self) -> Boolean:
        return self.args[0]


def where(cond: Boolean, a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """`where(cond, a, b)` as a sympy expression."""
    result: sympy.Expr = Where(cond, a, b)
    return result


class Kink(sympy.Function):
    """A function with kinks, printed as torch's own and differentiated through `expanded`.

    `expanded` routes gradients only (symgrad.reverse, symgrad.forward_mode): its value
    may differ from the kink's at ties and NaN, so values are always the kink's own. A
    kink whose derivative must be written out (an activation whose second derivative
    follows torch's) gives it as `partial` instead.
    """

    # The name in the spec language.
    name: ClassVar[str]

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    def expanded(self) -> sympy.Expr:
        """The same function written with `where`, whose gradient follows torch."""
        raise NotImplementedError

    def partial(self, index: int) -> sympy.Expr | None:
        """d self / d args[index] written out, or None to differentiate `expanded` instead."""
        return None

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        """(argument, value) pairs where the gradient jumps: the generated test samples them."""
        a, b = self.args[:2]
        return [(a, b), (b, a)]


class Relu(Kink):
    name, nargs = "relu", 1

    def expanded(self) -> sympy.Expr:
        (x,) = self.args
        return where(Le(x, 0), sympy.Integer(0), x)  # relu'(nan) = 1, as torch

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.args[0], sympy.Integer(0))]


class Maximum(Kink):
    name, nargs = "max", 2

    def expanded(self) -> sympy.Expr:
        a, b = self.args
        # A tie splits the gradient; a NaN on either side passes it whole to both (torch).
        return where(Lt(a, b), b, where(Gt(a, b), a, where(Eq(a, b), (a + b) / 2, a + b)))


class Minimum(Kink):
    name, nargs = "min", 2

    def expanded(self) -> sympy.Expr:
        a, b = self.args
        return where(Gt(a, b), b, where(Lt(a, b), a, where(Eq(a, b), (a + b) / 2, a + b)))


class Clamp(Kink):
    name, nargs = "clamp", 3

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        x, low, high = self.args
        return [(x, low), (x, high)]

    def expanded(self) -> sympy.Expr:
        x, low, high = self.args
        # torch: x where low <= x <= high; low below it when low < high; high above it or
        # when the bounds cross; nothing at a NaN or below equal bounds.
        inside = sympy.And(Ge(x, low), Le(x, high))
        below = sympy.And(Lt(x, low), Lt(low, high))
        above = sympy.Or(Gt(x, high), Lt(high, low))
        return where(inside, x, where(below, low, where(above, high, sympy.Integer(0))))


# Language name -> (number of arguments, builder). The first argument of `where` is a
# condition; every other argument is a value.
CONDITIONAL_FUNCTIONS: dict[str, tuple[int, Callable[..., sympy.Expr]]] = {
    "where": (3, where),
    "relu": (1, Relu),
    "max": (2, Maximum),
    "min": (2, Minimum),
    "clamp": (3, Clamp),
}

# Other accepted spellings (sympy's and torch's names).
CONDITIONAL_ALIASES = {
    "Max": "max",
    "Min": "min",
    "maximum": "max",
    "minimum": "min",
    "clip": "clamp",
}


# --- Note [Untaken branches] -----------------------------------------------------------

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
    if isinstance(cond, BooleanTrue) or _finite_everywhere(branch):
        return branch
    tensor_condition = bool(cond.free_symbols & tensors)
    # An integer number (polygamma's order) must stay a Python int: under a tensor
    # condition a where() would make it a tensor.
    variables = sorted(
        (
            v
            for v in branch.free_symbols
            if isinstance(v, sympy.Symbol)
            and (v in tensors or not (tensor_condition and v.is_integer))
        ),
        key=str,
    )
    safe = _safe_point(branch, cond, variables, tensors)
    if not safe:
        return branch
    return branch.xreplace({v: Where(cond, v, value) for v, value in safe.items()})


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
_EVERYWHERE_FINITE = frozenset({"sin", "cos", "tanh", "sigmoid", "atan", "erf", "erfc", "sign"})


def _finite_everywhere(expr: sympy.Basic) -> bool:
    """True for polynomials of bounded functions, which need no guard."""
    if expr.is_Atom:
        return True
    if isinstance(expr, Where):  # finite wherever its branches are
        return all(_finite_everywhere(branch) for branch in expr.args[1:])
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

    from symgrad import functions

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
        target: Any = torch
        *path, last = info.torch.split("(", 1)[0].split(".")[1:] or [""]
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
