"""The forms of `where`s that select numbers, chosen once for every backend; each spells them.

A gradient times a `where` of numbers (a straight-through estimator's, a clamp's or a leaky
relu's chosen gradient), relu's and leaky relu's backward, a saved sign read back: each
has a form cheaper than torch's `where` with the same values (Note [Selects of numbers]).
"""

from __future__ import annotations

import sympy

from symgrad.backends.forms.arithmetic import _MUL, _SELF_BRACKETED, ArithmeticForms
from symgrad.language import indexing, piecewise

# p / 2**k with |p| and 2**k up to this is exact in every dtype a select may take
# (bfloat16 keeps 8 significant bits; float16's range holds 2**-8).
_EXACT_SCALE = 2**8


class SelectForms(ArithmeticForms):
    """Selects of numbers in products and `where`s, in torch's cheaper operations."""

    def _select_product(self, expr: sympy.Mul) -> str | None:
        """k * where(c, a, 0) as k * c * a: the boolean c itself as the select.

        Note [Selects of numbers]: a straight-through or clamped gradient is the gradient
        times a `where` of a number and 0. On the CPU torch's `where` kernel is not
        vectorised (about sixteen multiplies, bench's cost table) where a multiply by a
        boolean tensor costs about two, so with k a float tensor (it keeps the product's
        dtype) the select is multiplied in, in the order that keeps every value: k * c is
        k or k * 0 (NaN for an infinite k, as k * where(...) is), then times a (k * ~c
        for where(c, 0, b)). A select of two nonzero numbers stays a `where`: k * b +
        (a - b) * k * c would turn an infinite k into NaN; where one of them is 1 (a
        leaky relu's or a clamp's chosen gradient), k * where(c, 1, s) is where(c, k, k * s),
        the same values (k * 1 is k) with no 0-d tensor made for the number on every call,
        and torch's leaky_relu_backward where c is x > 0. Two exact numbers keep the cast
        (`_exact_select`, cheaper than a `where` on the CPU). The fused loops keep the
        select, which costs nothing in registers.
        """
        selects = [f for f in expr.args if self._number_select(f)]
        if not selects:
            return None
        select = selects[0]
        cond, a, b = select.args
        rest = sympy.Mul(*(f for f in expr.args if f is not select))
        if not self._is_plain_tensor(rest):
            return None
        if b == 0:
            return self._times_condition(rest, cond, a)
        if a == 0:
            return self._times_condition(rest, sympy.Not(cond, evaluate=False), b)
        # Two exact numbers keep the cast; k is printed once: a name, or leaky relu's operand.
        if (_exact_in_every_dtype(a) and _exact_in_every_dtype(b)) or not _has_one(a, b):
            return None
        where, elsewhere = (rest if _has_one(n) else rest * n for n in (a, b))
        if rest.is_Symbol or self._leaky_parts(cond, where, elsewhere) is not None:
            return self._print(piecewise.Where(cond, where, elsewhere))
        return None

    def _leaky_parts(
        self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic
    ) -> tuple[sympy.Basic, sympy.Basic, sympy.Basic] | None:
        """(g, x, s) where where(cond, a, b) is where(x > 0, g, g * s), s a number."""
        if isinstance(cond, piecewise.Gt) and cond.args[1] == 0:
            x = cond.args[0]
        elif isinstance(cond, piecewise.Lt) and cond.args[0] == 0:
            x = cond.args[1]
        else:
            return None
        if not (self._is_plain_tensor(a) and self._is_plain_tensor(x)):
            return None
        if x.atoms(indexing.IndexSymbol):
            return None  # positions, not values
        # b is a's factors and the slope's, exactly (0.1 * g against g is no slope of 10).
        factors = list(sympy.Mul.make_args(b))
        for factor in sympy.Mul.make_args(a):
            if factor not in factors:
                return None
            factors.remove(factor)
        slope = sympy.Mul(*factors)
        return None if self.is_tensor(slope) else (a, x, slope)

    def _number_select(self, node: sympy.Basic) -> bool:
        """Whether `node` is where(c, a, b) of two numbers (or number inputs) on a tensor
        condition c."""
        return (
            isinstance(node, piecewise.Where)
            and not any(self.is_tensor(branch) for branch in node.args[1:])
            and self.is_tensor(node.args[0])
        )

    def _times_condition(self, factor: sympy.Expr, cond: sympy.Basic, number: sympy.Expr) -> str:
        """`factor * cond * number`, the tensor first (it gives the dtype; the boolean is 0
        or 1), the number last (Note [Selects of numbers])."""
        condition = self._print(cond)
        if not isinstance(cond, _SELF_BRACKETED):
            condition = f"({condition})"
        text = f"{self.parenthesize(factor, _MUL, strict=True)}*{condition}"
        return text if number == 1 else f"{text}*{self.parenthesize(number, _MUL, strict=True)}"

    def _threshold_backward(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str | None:
        """where(x <= t, 0, g) as torch's threshold_backward(g, x, t), relu's backward.

        The same value, NaN included (x <= t is false for a NaN x, and the kernel keeps g
        there), from one vectorised kernel where the CPU `where` costs about sixteen
        multiplies (Note [Selects of numbers]); torch
        differentiates it in g. Its result takes the dtype g and x promote to.
        """
        if a != 0 or not self.is_tensor(b):
            return None
        if isinstance(cond, piecewise.Le):
            x, t = cond.args
        elif isinstance(cond, piecewise.Ge):
            t, x = cond.args
        else:
            return None
        if self.is_tensor(t) or not self.is_tensor(x) or x in self.conditions:
            return None
        if x.atoms(indexing.IndexSymbol):
            return None  # positions, not values
        return self._spell_threshold_backward(self._print(b), self._print(x), self._print(t))

    def _leaky_relu_backward(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str | None:
        """where(x > 0, g, g * s) as torch's leaky_relu_backward(g, x, s), s a number.

        The same value, NaN included (x > 0 is false for a NaN x: g * s), from one
        vectorised kernel that reads g once; torch differentiates it in g. Its result takes
        the dtype g and x promote to (Note [Selects of numbers]).
        """
        parts = self._leaky_parts(cond, a, b)
        if parts is None:
            return None
        return self._spell_leaky_relu_backward(*(self._print(p) for p in parts))

    def _signed_select(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str | None:
        """where(c, g, -g) of a name g as g times c cast to g's dtype, doubled, less one:
        exact (g times 1 or -1, NaN and inf included), where the CPU `where` costs about
        sixteen multiplies (Note [Selects of numbers]).
        A saved sign mask reads back this way."""
        if not (isinstance(a, sympy.Symbol) and b == -a and self._is_plain_tensor(a)):
            return None
        sign = f"{self._spell_to_dtype(self._print(cond), self._spell_dtype_of(self._print(a)))}"
        # In parentheses: a `where` prints as an atom (x**2 of it squares all of it).
        return f"({self._print(a)}*{sign}.mul_(2).add_(-1))"

    def _exact_select(
        self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic, dtype: str
    ) -> str | None:
        """where(c, a, b) of two numbers exact in every float dtype (small integers, halves,
        quarters: a max's 1/2 at a tie) as c cast to the dtype, times a - b, plus b.

        The cast condition is 0 or 1 and a, b and a - b are bfloat16 numbers, so every
        step is exact in any dtype, NaN comparisons included (false, so b); three
        vectorised passes, the last two in place, where torch's CPU `where` costs about
        sixteen multiplies and its 0-d tensor of `a` is made on every call (on a GPU, a
        copy from the host) (Note [Selects of numbers]).
        """
        if not all(_exact_in_every_dtype(n) for n in (a, b, a - b)):
            return None
        # As rationals: sympy's Float(1.0) is not Integer(1).
        step, shift = sympy.Rational(a - b), sympy.Rational(b)
        # In place on the cast, a new tensor (a boolean condition into a value's dtype,
        # never bool: compared tensors are values), in torch's and ATen's method syntax
        # alike: a new full-size tensor per step cost more than the steps themselves.
        text = self._spell_to_dtype(self._print(cond), dtype)
        if step != 1:
            text += f".mul_({_literal(step)})"
        return text if shift == 0 else f"{text}.add_({_literal(shift)})"

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_threshold_backward(self, grad: str, x: str, threshold: str) -> str:
        """torch's threshold_backward: 0 where x <= threshold, else grad."""
        raise NotImplementedError

    def _spell_leaky_relu_backward(self, grad: str, x: str, slope: str) -> str:
        """torch's leaky_relu_backward: grad where x > 0, else grad * slope."""
        raise NotImplementedError

    def _spell_dtype_of(self, tensor: str) -> str:
        """The dtype of the tensor named `tensor`."""
        raise NotImplementedError

    def _spell_to_dtype(self, tensor: str, dtype: str) -> str:
        """`tensor` (a condition) converted to `dtype`."""
        raise NotImplementedError


def _exact_in_every_dtype(number: sympy.Basic) -> bool:
    """Whether `number` is p / 2**k with |p| <= 256 and 2**k <= 256: exact in bfloat16,
    float16, float32 and float64 alike."""
    if not number.is_Number:
        return False
    value = sympy.Rational(number)
    denominator = int(value.q)
    power_of_two = denominator & (denominator - 1) == 0
    return power_of_two and denominator <= _EXACT_SCALE and abs(int(value.p)) <= _EXACT_SCALE


def _literal(number: sympy.Basic) -> str:
    """An exact number as a literal both backends read alike (never `1/2`, integer division
    in C++)."""
    value = sympy.Rational(number)
    return str(int(value)) if value.q == 1 else repr(float(value))


def _has_one(*numbers: sympy.Basic) -> bool:
    """Whether one of `numbers` is 1, written 1 or 1.0 (sympy's Float(1.0) != 1)."""
    return any(n.is_Number and sympy.Rational(n) == 1 for n in numbers)
