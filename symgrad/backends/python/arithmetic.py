"""The Python printer's arithmetic: numbers, and torch's spelling of each arithmetic form.

`ArithmeticPrinter` spells the forms symgrad.backends.forms.arithmetic chooses: a call on
a tensor prints as torch, a call on numbers only prints with `math`, guarded where
Python would raise where torch gives inf or nan. symgrad.backends.python.printer adds the
spellings of the language's own constructs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms, join_sum
from symgrad.backends.python.spellings import SPELLINGS

# Integers from this size on print as floats (exact up to 2**53): a Python int in the
# generated code could grow past what torch takes as a scalar (k**2 with k = 2**40).
_MAX_PRINTED_INT = 2**31


class ArithmeticPrinter(ArithmeticForms):
    """Numbers and arithmetic in Python over torch tensors; the rest raises."""

    helper_names: ClassVar[Mapping[str, str]] = {
        "sum_to": "_sum_to",
        "unsqueeze_last": "_unsqueeze_last",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Whether printed code reads Python's math module (the module imports it then).
        self.uses_math = False

    # --- Numbers ------------------------------------------------------------------------

    def _print_Integer(self, expr: sympy.Integer) -> str:
        value = int(expr)
        if abs(value) >= _MAX_PRINTED_INT:
            try:
                return self._float(float(value))
            except OverflowError:
                raise UnprintableError(f"the constant {value} is too large") from None
        return str(value)

    def _print_Rational(self, expr: sympy.Rational) -> str:
        return f"{self._print(sympy.Integer(expr.p))}/{self._print(sympy.Integer(expr.q))}"

    def _print_Float(self, expr: sympy.Float) -> str:
        return self._float(float(expr))

    def _float(self, value: float) -> str:
        if not math.isfinite(value):
            raise UnprintableError(f"the constant {value} is not finite")
        return repr(value)

    def _print_Pi(self, expr: sympy.Basic) -> str:
        self.uses_math = True
        return "math.pi"

    def _print_Exp1(self, expr: sympy.Basic) -> str:
        self.uses_math = True
        return "math.e"

    def _number_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        if exponent.is_Number and exponent.is_negative:
            denominator = sympy.Pow(base, -exponent, evaluate=False) if exponent != -1 else base
            if base.is_zero is not False:
                return self._number_quotient(sympy.Integer(1), denominator)
            return f"1 / {self.parenthesize(denominator, PRECEDENCE['Mul'], strict=True)}"
        return self._spell_power(base, exponent)

    def _number_product(self, expr: sympy.Mul) -> str:
        """A product of numbers; a division by a number that may be 0 gives inf or nan.

        Note [Numbers outside the domain]: Python raises ZeroDivisionError where torch
        divides by 0, so a denominator not known to be nonzero is tested first.
        """
        numerator: list[sympy.Basic] = []
        denominator: list[sympy.Basic] = []
        for factor in expr.args:
            exponent = factor.exp if isinstance(factor, sympy.Pow) else sympy.Integer(0)
            # (x**-1/2 prints as rsqrt, which has its own safe form)
            if exponent.is_Number and exponent.is_negative and exponent != -sympy.S.Half:
                denominator.append(sympy.Pow(factor.base, -exponent))
                continue
            numerator.append(factor)
        if not any(d.is_zero is not False for d in denominator):
            return self._spell_product(expr)
        return self._number_quotient(sympy.Mul(*numerator), sympy.Mul(*denominator))

    def _number_quotient(self, numerator: sympy.Basic, denominator: sympy.Basic) -> str:
        """numerator / denominator on numbers, with torch's inf or nan where it is 0."""
        precedence = PRECEDENCE["Mul"]
        top = self.parenthesize(numerator, precedence, strict=True)
        bottom = self.parenthesize(denominator, precedence)
        infinity = f"math.copysign(math.inf, {self._print(denominator)})"
        self.uses_math = True
        at_zero = infinity if numerator == 1 else f"{top} * {infinity}"
        return f"({top} / {bottom} if {self._print(denominator)} else {at_zero})"

    def _spell_number_call(self, name: str, args: Sequence[sympy.Basic]) -> str:
        info = SPELLINGS[name]
        if info.math is None:
            raise UnprintableError(
                f"{name} of a number input is not supported; declare the input as a tensor"
            )
        spelling = info.math
        if info.safe_math is not None and not info.in_domain(*args):
            spelling = info.safe_math
        self.uses_math = self.uses_math or "math." in spelling
        return spelling.format(*(self._print(arg) for arg in args))

    # --- Tensors ------------------------------------------------------------------------

    def _tensor_spelling(self, name: str, args: Sequence[sympy.Basic]) -> tuple[str, bool]:
        info = SPELLINGS[name]
        return info.torch, info.tensor_arguments

    def _spell_scalar_tensor(self, text: str, like: str | None) -> str:
        dtype = f"{like}.dtype" if like is not None else "torch.get_default_dtype()"
        return f"torch.tensor({text}, dtype={dtype})"

    def _spell_reciprocal(self, denominator: sympy.Basic) -> str:
        return f"1 / {self.parenthesize(denominator, PRECEDENCE['Mul'], strict=True)}"

    def _chain_operands(self, base: sympy.Basic) -> tuple[str, str]:
        power = self.parenthesize(base, PRECEDENCE["Pow"], strict=True)
        return power, power

    def _spell_integer_power(self, operand: str, exponent: int, composite: bool) -> str:
        if composite and not operand.endswith(")"):
            operand = f"({operand})"
        return f"{operand}**{exponent}"

    def _spell_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        pow_precedence = PRECEDENCE["Pow"]
        left = self.parenthesize(base, pow_precedence, strict=True)
        return f"{left}**{self.parenthesize(exponent, pow_precedence, strict=True)}"

    def _spell_sum(self, expr: sympy.Add, order: str | None) -> str:
        if not self.is_tensor(expr):
            text: str = StrPrinter._print_Add(self, expr, order)
            return text
        return join_sum(*self._sum_terms(expr, order))  # Note [Sum order] in forms

    def _spell_addcmul(self, rest: str, a: str, b: str, value: str | None) -> str:
        keyword = "" if value is None else f", value={value}"
        return f"torch.addcmul({rest}, {a}, {b}{keyword})"

    def _spell_product(self, expr: sympy.Mul) -> str:
        text: str = StrPrinter._print_Mul(self, expr)
        return text
