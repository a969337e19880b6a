"""The C++ printer's arithmetic: numbers in double, and ATen's spelling of each form.

`ArithmeticPrinter` spells the forms symgrad.backends.forms.arithmetic chooses in C++
semantics: a call on a tensor prints as ATen (`at::exp(x)`), one on numbers in double
(`std::exp(lo)`), and number-only arithmetic never divides integers.
symgrad.backends.cpp.printer adds the spellings of the language's own constructs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import sympy
from sympy.logic.boolalg import BooleanFalse, BooleanTrue
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter

from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.spellings import SPELLINGS, double_literal, is_one_operand
from symgrad.backends.forms.arithmetic import PRINTABLE_TYPES, ArithmeticForms, join_sum
from symgrad.language import functions, piecewise

# Integers from this size on print as doubles (exact up to 2**53): a C++ int literal
# stops at 2**31 - 1.
_MAX_PRINTED_INT = 2**31
_MUL = PRECEDENCE["Mul"]


class ArithmeticPrinter(ArithmeticForms):
    """Numbers and arithmetic in C++ over ATen tensors; the rest raises."""

    printable_types = (*PRINTABLE_TYPES, BooleanTrue, BooleanFalse)

    helper_names: ClassVar[Mapping[str, str]] = {
        "sum_to": "sum_to",
        "unsqueeze_last": "unsqueeze_last",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Whether the node being printed computes on numbers only: its integer literals
        # then print as doubles (2.0), so that no C++ integer arithmetic divides.
        self._numbers = True

    def _print(self, expr: Any, **kwargs: Any) -> str:
        """Print `expr`, its integer literals as its parent computes (see _numbers)."""
        outer = self._numbers  # the base's _print refuses what is not printable
        if isinstance(expr, sympy.Basic) and not isinstance(expr, _LITERALS):
            self._numbers = not self.is_tensor(expr)  # a literal takes its parent's kind
        try:
            return super()._print(expr, **kwargs)
        finally:
            self._numbers = outer

    def parenthesize(self, item: Any, level: int, strict: bool = False) -> str:
        """`item` printed, in parentheses where it binds more loosely than `level`,
        unless it prints as one operand anyway (`at::rsub(x, 1)`)."""
        text = self._print(item)
        loose = precedence(item) < level or (strict and precedence(item) <= level)
        return f"({text})" if loose and not is_one_operand(text) else text

    # --- Numbers ------------------------------------------------------------------------

    def _print_Integer(self, expr: sympy.Integer) -> str:
        value = int(expr)
        if abs(value) >= _MAX_PRINTED_INT or self._numbers:
            return double_literal(value)
        return str(value)

    def _print_Rational(self, expr: sympy.Rational) -> str:
        if expr.q & (expr.q - 1) == 0 and abs(expr.p) < 2**53:  # exact: 0.5, -0.25
            return double_literal(float(expr))
        return f"({double_literal(expr.p)} / {self._print(sympy.Integer(expr.q))})"

    def _print_Float(self, expr: sympy.Float) -> str:
        return double_literal(float(expr))

    def _print_Pi(self, expr: sympy.Basic) -> str:
        return f"{math.pi:.17g}"

    def _print_Exp1(self, expr: sympy.Basic) -> str:
        return f"{math.e:.17g}"

    def _print_BooleanTrue(self, expr: sympy.Basic) -> str:
        return "true"

    def _print_BooleanFalse(self, expr: sympy.Basic) -> str:
        return "false"

    def _number_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        if exponent == -1:
            return f"(1.0 / {self.parenthesize(base, _MUL, strict=True)})"
        return f"std::pow({self._print(base)}, {self._print(exponent)})"

    def _number_product(self, expr: sympy.Mul) -> str:
        return self._fraction(expr)

    def _spell_number_call(self, name: str, args: Sequence[sympy.Basic]) -> str:
        info = SPELLINGS[name]
        if info.std is None:
            raise UnprintableError(
                f"{name} of a number input is not supported; declare the input as a tensor"
            )
        return info.std.format(*(self._print(arg) for arg in args))

    # --- Tensors ------------------------------------------------------------------------

    def _tensor_spelling(self, name: str, args: Sequence[sympy.Basic]) -> tuple[str, bool]:
        info = SPELLINGS[name]
        if any(self.is_tensor(args[k]) for k in info.number_arguments):
            raise UnprintableError(
                f"{name}() takes its order as a number (a constant or an int input), not a tensor"
            )
        return info.aten, info.tensor_arguments

    def _spell_scalar_tensor(self, text: str, like: str | None) -> str:
        """On the CPU, which ATen accepts beside any device."""
        dtype = f"{like}.scalar_type()" if like is not None else "at::get_default_dtype()"
        return f"at::scalar_tensor({text}, at::TensorOptions().dtype({dtype}))"

    def _spell_reciprocal(self, denominator: sympy.Basic) -> str:
        return f"at::reciprocal({self._print(denominator)})"

    def _chain_operands(self, base: sympy.Basic) -> tuple[str, str]:
        return self._print(base), self.parenthesize(base, _MUL)

    def _spell_integer_power(self, operand: str, exponent: int, composite: bool) -> str:
        return f"at::pow({operand}, {exponent})"

    def _spell_power(self, base: sympy.Basic, exponent: sympy.Basic) -> str:
        return f"at::pow({self._print(base)}, {self._print(exponent)})"

    def _spell_addcmul(self, rest: str, a: str, b: str, value: str | None) -> str:
        return f"at::addcmul({rest}, {a}, {b}{'' if value is None else f', {value}'})"

    def _spell_product(self, expr: sympy.Mul) -> str:
        return self._fraction(expr)

    def _spell_sum(self, expr: sympy.Add, order: str | None) -> str:
        """A sum; ATen's `number - tensor` fills a tensor of the tensor's dtype before
        subtracting (two kernels, and an integer tensor truncates the number): a positive
        tensor term goes first instead, or at::rsub takes the subtraction, as torch's
        own `1 - x`."""
        if not self.is_tensor(expr):
            text: str = StrPrinter._print_Add(self, expr, order)
            return text
        terms, texts = self._sum_terms(expr, order)  # Note [Sum order] in forms
        first = next(i for i, term in enumerate(terms) if self.is_tensor(term))
        if not texts[first].startswith("-"):
            return join_sum(terms, texts)
        head = f"at::rsub({self._print(-terms[first])}, {self._print(sympy.Add(*terms[:first]))})"
        return join_sum([None, *terms[first + 1 :]], [head, *texts[first + 1 :]])

    def _fraction(self, expr: sympy.Mul) -> str:
        """`expr` as numerator/denominator, with C++'s types in mind.

        A quotient of numbers divides in double (an int64_t denominator is cast); a
        number over a tensor multiplies by at::reciprocal, as torch's own `2 / x` does
        (ATen's `number / tensor` fills a tensor of the denominator's dtype first).
        """
        coefficient, rest = expr.as_coeff_Mul()
        sign = "-" if coefficient < 0 else ""
        coefficient = abs(coefficient)
        numerator: list[sympy.Basic] = []
        denominator: list[sympy.Basic] = []
        if coefficient.is_Rational and not coefficient.is_Integer:
            numerator += [sympy.Integer(coefficient.p)] if coefficient.p != 1 else []
            denominator.append(sympy.Integer(coefficient.q))
        elif coefficient != 1:
            numerator.append(coefficient)
        for factor in sympy.Mul.make_args(rest):
            if isinstance(factor, sympy.Pow) and factor.exp.as_coeff_Mul()[0] < 0:
                exponent = -factor.exp
                inverse = sympy.Pow(factor.base, exponent, evaluate=False)
                denominator.append(factor.base if exponent == 1 else inverse)
            else:
                numerator.append(factor)
        top = [self.parenthesize(f, _MUL) for f in numerator]
        bottom = "*".join(self.parenthesize(f, _MUL, strict=True) for f in denominator)
        if not denominator:
            return sign + "*".join(top)
        if self.is_tensor(expr) and not any(self.is_tensor(f) for f in numerator):
            return sign + "*".join([*top, f"at::reciprocal({bottom})"])
        if self._numbers and numerator and not any(map(is_double, (*numerator, *denominator))):
            bottom = f"static_cast<double>({bottom})"  # an integer quotient would truncate
        elif len(denominator) > 1:
            bottom = f"({bottom})"
        return f"{sign}{'*'.join(top) or '1.0'}/{bottom}"


# Nodes printed the same in any context, or (integers) as their parent computes.
_LITERALS = (sympy.Number, sympy.NumberSymbol, BooleanTrue, BooleanFalse)


def is_double(expr: sympy.Basic) -> bool:
    """True when the number expression `expr` surely prints as a double (not an int64_t)."""
    if isinstance(expr, (sympy.Number, sympy.NumberSymbol, sympy.Pow, piecewise.Kink)):
        return True  # literals print as doubles, powers as std::pow, kinks as std::max<double>
    if isinstance(expr, (functions.ElementwiseFunction, piecewise.Where)):
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return any(is_double(arg) for arg in expr.args)
    return False
