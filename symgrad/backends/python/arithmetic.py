"""The base of the Python printer: numbers, arithmetic and function calls over torch tensors.

`ArithmeticPrinter` knows which symbols hold tensors: a call on a tensor prints as torch,
a call on numbers only prints with `math`. Anything it does not know raises, so broken
code is never emitted; `symgrad.backends.python.printer` adds the language's own
constructs (conditionals, kinks, activations, reductions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from symgrad.backends.base import UnprintableError
from symgrad.backends.python.spellings import SPELLINGS
from symgrad.backends.statements import value_tensors
from symgrad.language import broadcasts, functions, indexing, piecewise, pullbacks, reductions

# Integers from this size on print as floats (exact up to 2**53): a Python int in the
# generated code could grow past what torch takes as a scalar (k**2 with k = 2**40).
_MAX_PRINTED_INT = 2**31


class ArithmeticPrinter(StrPrinter):
    """Prints numbers, arithmetic and elementwise calls; the rest raises UnprintableError."""

    def __init__(
        self,
        tensor_symbols: frozenset[sympy.Basic],
        renames: Mapping[sympy.Basic, str] | None = None,
        conditions: Mapping[sympy.Basic, sympy.Basic] | None = None,
    ) -> None:
        super().__init__({"order": "none"})
        self.tensor_symbols = tensor_symbols
        # Temporaries that hold conditions (boolean tensors), with their definitions.
        self.conditions = conditions or {}
        # Names to print instead of a symbol's own (temporaries renumbered in order).
        self.renames = renames or {}
        # Names of the module's helper functions, by role (the emitter may rename them).
        self.helpers: Mapping[str, str] = {"sum_to": "_sum_to", "unsqueeze_last": "_unsqueeze_last"}
        # Fold `a + b * c` into torch.addcmul; off where the formula is shown as written.
        self.fuse_products = True
        # Tensors known to have a reduced shape ([N, 1] beside [N, C] values), which
        # products multiply in before the full-size factors (see _print_Mul).
        self.small_symbols: frozenset[sympy.Basic] = frozenset()
        self.uses_math = False
        # Helper roles that printed code calls (pullbacks through a helper).
        self.used_helpers: set[str] = set()

    def _print(self, expr: Any, **kwargs: Any) -> str:
        """Print `expr` if it is something torch code can say; raise otherwise (strict)."""
        if not _is_printable(expr):
            raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")
        text: str = super()._print(expr, **kwargs)
        return text

    def is_tensor(self, expr: sympy.Basic) -> bool:
        """True when `expr` depends on a tensor, so torch functions must be used."""
        return bool(expr.free_symbols & self.tensor_symbols)

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.renames.get(expr, str(expr.name))

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

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        base, exponent = expr.args
        if exponent == sympy.S.Half:
            return self._call("sqrt", base)
        if exponent == -sympy.S.Half:
            return self._call("rsqrt", base)
        if exponent.is_Number and exponent.is_negative:
            denominator = sympy.Pow(base, -exponent, evaluate=False) if exponent != -1 else base
            if not self.is_tensor(base) and base.is_zero is not False:
                return self._number_quotient(sympy.Integer(1), denominator)
            return f"1 / {self.parenthesize(denominator, PRECEDENCE['Mul'], strict=True)}"
        pow_precedence = PRECEDENCE["Pow"]
        left = self.parenthesize(base, pow_precedence, strict=True)
        if exponent.is_Integer and 3 < int(exponent) <= 64 and self.is_tensor(base):
            return _power_chain(left, int(exponent))
        right = self.parenthesize(exponent, pow_precedence, strict=True)
        return f"{left}**{right}"

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        """A sum of tensors, with one product of two tensors in it folded into torch.addcmul.

        `a + b * c` as `torch.addcmul(a, b, c)`: one kernel and one temporary less.
        """
        if self.fuse_products and self.is_tensor(expr):
            for term in reversed(expr.args):
                fused = self._addcmul(expr, term)
                if fused is not None:
                    return fused
        text: str = super()._print_Add(expr, order)
        return text

    def _addcmul(self, expr: sympy.Add, term: sympy.Expr) -> str | None:
        """`torch.addcmul(rest, a, b, value=k)` for the term `k * a * b` of `expr`, if it is one."""
        coefficient, product = term.as_coeff_Mul()
        factors = sympy.Mul.make_args(product)
        if len(factors) != 2 or not all(self._is_plain_tensor(f) for f in factors):
            return None
        rest = sympy.Add(*(a for a in expr.args if a is not term))
        if not self.is_tensor(rest):
            return None
        value = "" if coefficient == 1 else f", value={self._print(coefficient)}"
        a, b = (self._print(f) for f in factors)
        return f"torch.addcmul({self._print(rest)}, {a}, {b}{value})"

    def _is_plain_tensor(self, expr: sympy.Basic) -> bool:
        """A tensor value that is not a condition (addcmul takes no boolean tensor)."""
        return self.is_tensor(expr) and expr not in self.conditions and not expr.is_Boolean

    def _print_Mul(self, expr: sympy.Mul) -> str:
        """A product with its numbers and reduced-shape factors first.

        torch evaluates `a * b * c` left to right, one kernel per `*`: multiplying the
        small factors together first leaves one full-size multiply per full-size
        factor (`-r**2 / 2 * g * y` is two full passes, `-g * y * r**2 / 2` four).
        """
        if not self.is_tensor(expr):
            return self._print_number_Mul(expr)
        split = self._split_square_quotient(expr)
        if split is not None:
            return split
        small = [a for a in expr.args if self._is_small(a)]
        numbers = [a for a in small if not self.is_tensor(a)]
        saves_a_pass = len(numbers) > 1 or len(numbers) < len(small)
        if len(small) == len(expr.args) or not saves_a_pass:
            text: str = super()._print_Mul(expr)
            return text
        full = [a for a in expr.args if not self._is_small(a)]
        precedence = PRECEDENCE["Mul"]
        first = self.parenthesize(sympy.Mul(*small), precedence, strict=True)
        second = self.parenthesize(sympy.Mul(*full), precedence, strict=True)
        return f"{first}*{second}"

    def _print_number_Mul(self, expr: sympy.Mul) -> str:
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
            text: str = super()._print_Mul(expr)
            return text
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

    def _split_square_quotient(self, expr: sympy.Mul) -> str | None:
        """a * b / d**2 as (a / d) * (b / d), as torch computes a quotient's gradient.

        The gradient of x / y in y is -g * x / y**2; y**2 under- or overflows in float32
        long before the result does (y = 1e-30), so the two factors are each divided by
        y, as torch's `-(g / y) * (x / y)`, at the same number of kernels.
        """
        squares = [
            f
            for f in expr.args
            if isinstance(f, sympy.Pow) and f.exp == -2 and self.is_tensor(f.base)
        ]
        if len(squares) != 1:
            return None
        (square,) = squares
        rest = [f for f in expr.args if f is not square]
        tensors = [f for f in rest if self.is_tensor(f)]
        if len(tensors) < 2:
            return None
        numbers = [f for f in rest if not self.is_tensor(f)]
        inverse = sympy.Pow(square.base, -1)
        first = sympy.Mul(*numbers, tensors[0], inverse)
        second = sympy.Mul(*tensors[1:], inverse)
        precedence = PRECEDENCE["Mul"]
        left = self.parenthesize(first, precedence, strict=True)
        return f"{left}*{self.parenthesize(second, precedence)}"

    def _is_small(self, expr: sympy.Basic) -> bool:
        """A number, or a tensor that depends only on reduced-shape values."""
        if isinstance(expr, (reductions.Reduction, reductions.SumTo)):
            return True
        small: bool = expr.free_symbols & self.tensor_symbols <= self.small_symbols
        return small

    def _print_ElementwiseFunction(self, expr: functions.ElementwiseFunction) -> str:
        return self._call(type(expr).__name__, *expr.args)

    def _call(self, name: str, *args: sympy.Basic) -> str:
        info = SPELLINGS[name]
        if any(self.is_tensor(arg) for arg in args):
            texts = [self._print(arg) for arg in args]
            if info.tensor_arguments:
                texts = self._as_tensors(args, texts)
            return info.torch.format(*texts)
        if info.math is None:
            raise UnprintableError(
                f"{name} of a number input is not supported; declare the input as a tensor"
            )
        spelling = info.math
        if info.safe_math is not None and not info.in_domain(*args):
            spelling = info.safe_math
        self.uses_math = self.uses_math or "math." in spelling
        return spelling.format(*(self._print(arg) for arg in args))

    def _as_tensors(self, args: tuple[sympy.Basic, ...], texts: list[str]) -> list[str]:
        """Number arguments beside tensors as 0-d tensors of a tensor argument's dtype.

        A 0-d float64 tensor would promote a 0-d float32 argument to float64 (0-d tensors
        promote each other); one of the tensor's own dtype keeps the dtype torch gives a
        Python number. It stays on the CPU, which torch accepts beside any device.
        """
        values = value_tensors(args, self.tensor_symbols, self.conditions)
        dtype = f"{self._print(values[0])}.dtype" if values else "torch.get_default_dtype()"
        return [
            text if self.is_tensor(arg) else f"torch.tensor({text}, dtype={dtype})"
            for arg, text in zip(args, texts, strict=True)
        ]

    # --- Conditions and conditional values (symgrad.language.piecewise) ---------------------

    def _operand(self, expr: sympy.Basic) -> str:
        """`expr` printed so that a method call can follow it: `x`, `f(x)` or `(a + b)`."""
        text = self._print(expr)
        is_call = isinstance(expr, sympy.Function) and text.endswith(")")
        return text if expr.is_Symbol or is_call else f"({text})"

    def _print_Function(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print the function {type(expr).__name__}")

    def _print_Basic(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")

    def _print_Derivative(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print an unevaluated derivative: {expr}")

    def emptyPrinter(self, expr: Any) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")


RELATIONS: dict[type[sympy.Basic], str] = {
    sympy.StrictGreaterThan: ">",
    sympy.StrictLessThan: "<",
    sympy.GreaterThan: ">=",
    sympy.LessThan: "<=",
    sympy.Equality: "==",
    sympy.Unequality: "!=",
}

# The only expression types a generated module contains.
_PRINTABLE_TYPES = (
    sympy.Symbol,
    sympy.Add,
    sympy.Mul,
    sympy.Pow,
    functions.ElementwiseFunction,
    piecewise.Where,
    piecewise.Kink,
    reductions.Reduction,
    reductions.Normalization,
    reductions.Unsqueeze,
    reductions.SumTo,
    broadcasts.Broadcast,
    broadcasts.ZerosLike,
    indexing.Gather,
    indexing.ScatterAdd,
    pullbacks.Pullback,
    sympy.And,
    sympy.Or,
    sympy.Not,
    *RELATIONS,
)


def _is_printable(expr: Any) -> bool:
    if isinstance(expr, (int, str)):  # parts StrPrinter prints on the way (p and q, signs)
        return True
    if isinstance(expr, sympy.Number):
        return bool(expr.is_finite)
    if isinstance(expr, sympy.NumberSymbol):
        return expr in (sympy.pi, sympy.E)
    return isinstance(expr, _PRINTABLE_TYPES)


def _power_chain(base: str, exponent: int) -> str:
    """base**exponent as squares, cubes and products (x**6 as `(x**2)**3`).

    torch computes `x**2` and `x**3` as products, but any larger integer power through
    the general pow kernel, which costs about 25 multiplies per element on CPU. The
    result binds as tightly as a power (a product comes parenthesised).
    """
    if exponent <= 3:
        return f"{base}**{exponent}"
    for root in (3, 2):
        if exponent % root == 0:
            inner = _power_chain(base, exponent // root)
            return f"{inner if inner.endswith(')') else f'({inner})'}**{root}"
    return f"({base} * {_power_chain(base, exponent - 1)})"
