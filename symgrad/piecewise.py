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
gradients multiplies NaN by zero. Before differentiating, `guard_branches` rewrites each
branch so that the variables of its condition are replaced, where the condition does not
select that branch, by a value that satisfies it: sqrt(x) becomes
sqrt(where(x > 0, x, 1)). The values are unchanged where the branch is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

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
        if isinstance(cond, BooleanTrue):
            return a
        if isinstance(cond, BooleanFalse):
            return b
        if a == b:
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
    """A function with kinks, printed as torch's own and differentiated through `expanded`."""

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    def expanded(self) -> sympy.Expr:
        """The same function written with `where`, whose gradient follows torch."""
        raise NotImplementedError


class Relu(Kink):
    nargs = 1

    def expanded(self) -> sympy.Expr:
        (x,) = self.args
        return where(Gt(x, 0), x, sympy.Integer(0))


class Maximum(Kink):
    nargs = 2

    def expanded(self) -> sympy.Expr:
        a, b = self.args
        return where(Gt(a, b), a, where(Lt(a, b), b, (a + b) / 2))


class Minimum(Kink):
    nargs = 2

    def expanded(self) -> sympy.Expr:
        a, b = self.args
        return where(Lt(a, b), a, where(Gt(a, b), b, (a + b) / 2))


class Clamp(Kink):
    nargs = 3

    def expanded(self) -> sympy.Expr:
        x, low, high = self.args
        return where(Lt(x, low), low, where(Gt(x, high), high, x))


def expand_kinks(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every kinked function written out with `where`, for differentiation."""
    if not expr.has(Kink):
        return expr
    result: sympy.Expr = expr.replace(
        lambda node: isinstance(node, Kink), lambda node: node.expanded()
    )
    return result


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

    Only the symbols in `guarded` (the tensors) are replaced; see Note [Untaken branches].
    """
    candidates = set(guarded)
    if not expr.has(Where):
        return expr

    def visit(node: sympy.Basic) -> sympy.Basic:
        if not node.args:
            return node
        args = [visit(arg) for arg in node.args]
        if isinstance(node, Where):
            cond, a, b = args
            variables = sorted(cond.free_symbols & candidates, key=str)
            a = _guard(a, cond, variables)
            b = _guard(b, sympy.Not(cond), variables)
            return Where(cond, a, b)
        return node.func(*args) if args != list(node.args) else node

    result: sympy.Expr = visit(expr)
    return result


def _guard(branch: sympy.Expr, cond: Boolean, variables: list[sympy.Symbol]) -> sympy.Expr:
    used = [v for v in variables if v in branch.free_symbols]
    if not used or _finite_everywhere(branch):
        return branch
    safe = _satisfying_point(cond, used)
    if safe is None:
        return branch
    return branch.xreplace({v: Where(cond, v, safe[v]) for v in used})


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
    for value in _candidates(cond, variables):
        point = {v: value for v in variables}
        if isinstance(cond.xreplace(point), BooleanTrue):
            return point
    return None


def _candidates(cond: Boolean, variables: list[sympy.Symbol]) -> list[Any]:
    """Constants, and points next to the other side of each comparison (x > lo -> lo + 1)."""
    found: list[Any] = list(_SAFE_CANDIDATES)
    for relation in cond.atoms(sympy.core.relational.Relational):
        for side in relation.args:
            if not side.free_symbols & set(variables):
                found += [side + 1, side - 1, side]
    return found
