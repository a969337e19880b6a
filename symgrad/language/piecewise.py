"""Conditional values: `where(cond, a, b)` and the kinked functions built on it.

One node, `Where`, carries every conditional. relu, max, min and clamp are written with
it so that their gradients follow torch's conventions by construction:

- relu(x) = where(x > 0, x, 0): the gradient at 0 is 0, as for torch.relu;
- max(a, b) = where(a > b, a, where(a < b, b, (a + b) / 2)): at a tie each side gets
  half the gradient, as torch.maximum gives it (min likewise);
- clamp(x, lo, hi) = where(x < lo, lo, where(x > hi, hi, x)): x gets the gradient on
  the closed interval, boundaries included, as torch.clamp gives it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import (
    Boolean,
    BooleanAtom,
    BooleanFalse,
    BooleanFunction,
    BooleanTrue,
)

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

    `expanded` routes gradients only (symgrad.ad.reverse, symgrad.ad.forward_mode): its value
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


def is_condition(expr: sympy.Basic) -> bool:
    """True for comparisons and their combinations (sympy's Symbol is a Boolean too)."""
    return isinstance(expr, (Relational, BooleanFunction, BooleanAtom))
