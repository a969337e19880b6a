"""The base of the C++ printer: numbers, arithmetic and function calls over ATen tensors.

`ArithmeticPrinter` mirrors symgrad.backends.python.arithmetic in C++ semantics: a call on
a tensor prints as ATen (`at::exp(x)`), one on numbers in double (`std::exp(lo)`), and
number-only arithmetic never divides integers. Anything it does not know raises
UnprintableError, so broken code is never emitted; symgrad.backends.cpp.printer adds the
language's own constructs (conditionals, kinks, activations, reductions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import sympy
from sympy.logic.boolalg import BooleanFalse, BooleanTrue
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter

from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.spellings import SPELLINGS, double_literal, is_one_operand, power_chain
from symgrad.backends.statements import value_tensors
from symgrad.language import broadcasts, functions, indexing, piecewise, pullbacks, reductions

# Integers from this size on print as doubles (exact up to 2**53): a C++ int literal
# stops at 2**31 - 1.
_MAX_PRINTED_INT = 2**31
_MUL = PRECEDENCE["Mul"]


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
        self.helpers: dict[str, str] = {"sum_to": "sum_to", "unsqueeze_last": "unsqueeze_last"}
        # Fold `a + b * c` into at::addcmul; off where the formula is shown as written.
        self.fuse_products = True
        # Tensors known to have a reduced shape, multiplied in first (see _print_Mul).
        self.small_symbols: frozenset[sympy.Basic] = frozenset()
        # Helper roles that printed code calls.
        self.used_helpers: set[str] = set()
        # Whether the node being printed computes on numbers only: its integer literals
        # then print as doubles (2.0), so that no C++ integer arithmetic divides.
        self._numbers = True

    def _print(self, expr: Any, **kwargs: Any) -> str:
        """Print `expr` if C++ can say it; raise otherwise (strict)."""
        if not _is_printable(expr):
            raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")
        outer = self._numbers
        if isinstance(expr, sympy.Basic) and not isinstance(expr, _LITERALS):
            self._numbers = not self.is_tensor(expr)  # a literal takes its parent's kind
        try:
            text: str = super()._print(expr, **kwargs)
        finally:
            self._numbers = outer
        return text

    def parenthesize(self, item: Any, level: int, strict: bool = False) -> str:
        """`item` printed, in parentheses where it binds more loosely than `level`,
        unless it prints as one operand anyway (`at::rsub(x, 1)`)."""
        text = self._print(item)
        loose = precedence(item) < level or (strict and precedence(item) <= level)
        return f"({text})" if loose and not is_one_operand(text) else text

    def is_tensor(self, expr: sympy.Basic) -> bool:
        """True when `expr` depends on a tensor, so ATen functions must be used."""
        return bool(expr.free_symbols & self.tensor_symbols)

    # --- Numbers ------------------------------------------------------------------------

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.renames.get(expr, str(expr.name))

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

    # --- Arithmetic ---------------------------------------------------------------------

    def _print_Pow(self, expr: sympy.Pow, rational: bool = False) -> str:
        base, exponent = expr.args
        if exponent == sympy.S.Half:
            return self._call("sqrt", base)
        if exponent == -sympy.S.Half:
            return self._call("rsqrt", base)
        if not self.is_tensor(expr):
            if exponent == -1:
                return f"(1.0 / {self.parenthesize(base, _MUL, strict=True)})"
            return f"std::pow({self._print(base)}, {self._print(exponent)})"
        if self.is_tensor(base) and exponent.is_Number and exponent.is_negative:
            inverse = sympy.Pow(base, -exponent, evaluate=False) if exponent != -1 else base
            return f"at::reciprocal({self._print(inverse)})"
        if exponent.is_Integer and 3 < int(exponent) <= 64 and self.is_tensor(base):
            return power_chain(self._print(base), self.parenthesize(base, _MUL), int(exponent))
        return f"at::pow({self._print(base)}, {self._print(exponent)})"

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        """A sum; one of tensors with a product of two tensors folded into at::addcmul.

        ATen's `number - tensor` fills a tensor of the tensor's dtype before subtracting
        (two kernels, and an integer tensor truncates the number): a positive tensor term
        goes first instead, or at::rsub takes the subtraction, as torch's own `1 - x`.
        """
        if not self.is_tensor(expr):
            text: str = super()._print_Add(expr, order)
            return text
        if self.fuse_products:
            for term in reversed(expr.args):
                fused = self._addcmul(expr, term)
                if fused is not None:
                    return fused
        terms = list(self._as_ordered_terms(expr, order=order))
        texts = [self._print(term) for term in terms]
        first = next(i for i, term in enumerate(terms) if self.is_tensor(term))
        if first == 0 or not texts[first].startswith("-"):
            return _sum(terms, texts)
        for i in range(first + 1, len(terms)):
            if self.is_tensor(terms[i]) and not texts[i].startswith("-"):
                moved = [i, *(k for k in range(len(terms)) if k != i)]
                return _sum([terms[k] for k in moved], [texts[k] for k in moved])
        head = f"at::rsub({self._print(-terms[first])}, {self._print(sympy.Add(*terms[:first]))})"
        return _sum([None, *terms[first + 1 :]], [head, *texts[first + 1 :]])

    def _addcmul(self, expr: sympy.Add, term: sympy.Expr) -> str | None:
        """`at::addcmul(rest, a, b, k)` for the term `k * a * b` of `expr`, if it is one."""
        coefficient, product = term.as_coeff_Mul()
        factors = sympy.Mul.make_args(product)
        if len(factors) != 2 or not all(self._is_plain_tensor(f) for f in factors):
            return None
        rest = sympy.Add(*(a for a in expr.args if a is not term))
        if not self.is_tensor(rest):
            return None
        value = "" if coefficient == 1 else f", {self._print(coefficient)}"
        a, b = (self._print(f) for f in factors)
        return f"at::addcmul({self._print(rest)}, {a}, {b}{value})"

    def _is_plain_tensor(self, expr: sympy.Basic) -> bool:
        """A tensor value that is not a condition (addcmul takes no boolean tensor)."""
        return self.is_tensor(expr) and expr not in self.conditions and not expr.is_Boolean

    def _print_Mul(self, expr: sympy.Mul) -> str:
        """A product with its numbers and reduced-shape factors first.

        ATen evaluates `a * b * c` left to right, one kernel per `*`: multiplying the
        small factors together first leaves one full-size multiply per full-size factor.
        """
        if not self.is_tensor(expr):
            return self._fraction(expr)
        split = self._split_square_quotient(expr)
        if split is not None:
            return split
        small = [a for a in expr.args if self._is_small(a)]
        numbers = [a for a in small if not self.is_tensor(a)]
        saves_a_pass = len(numbers) > 1 or len(numbers) < len(small)
        if len(small) == len(expr.args) or not saves_a_pass:
            return self._fraction(expr)
        full = [a for a in expr.args if not self._is_small(a)]
        first = self.parenthesize(sympy.Mul(*small), _MUL, strict=True)
        return f"{first}*{self.parenthesize(sympy.Mul(*full), _MUL, strict=True)}"

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

    def _split_square_quotient(self, expr: sympy.Mul) -> str | None:
        """a * b / d**2 as (a / d) * (b / d), as torch computes a quotient's gradient.

        d**2 under- or overflows in float32 long before the result does (d = 1e-30), so
        the two factors are each divided by d, at the same number of kernels.
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
        left = self.parenthesize(first, _MUL, strict=True)
        return f"{left}*{self.parenthesize(second, _MUL)}"

    def _is_small(self, expr: sympy.Basic) -> bool:
        """A number, or a tensor that depends only on reduced-shape values."""
        if isinstance(expr, (reductions.Reduction, reductions.SumTo)):
            return True
        small: bool = expr.free_symbols & self.tensor_symbols <= self.small_symbols
        return small

    # --- Calls --------------------------------------------------------------------------

    def _print_ElementwiseFunction(self, expr: functions.ElementwiseFunction) -> str:
        return self._call(type(expr).__name__, *expr.args)

    def _call(self, name: str, *args: sympy.Basic) -> str:
        info = SPELLINGS[name]
        if not any(self.is_tensor(arg) for arg in args):
            if info.std is None:
                raise UnprintableError(
                    f"{name} of a number input is not supported; declare the input as a tensor"
                )
            return info.std.format(*(self._print(arg) for arg in args))
        if any(self.is_tensor(args[k]) for k in info.number_arguments):
            raise UnprintableError(
                f"{name}() takes its order as a number (a constant or an int input), not a tensor"
            )
        texts = [self._print(arg) for arg in args]
        if info.tensor_arguments:
            texts = self._as_tensors(args, texts)
        return info.aten.format(*texts)

    def _as_tensors(self, args: tuple[sympy.Basic, ...], texts: list[str]) -> list[str]:
        """Number arguments beside tensors as 0-d tensors of a tensor argument's dtype.

        On the CPU, which ATen accepts beside any device, as the Python printer's
        `torch.tensor(v, dtype=x.dtype)`: a 0-d double tensor would promote float32.
        """
        values = value_tensors(args, self.tensor_symbols, self.conditions)
        dtype = f"{self._print(values[0])}.scalar_type()" if values else "at::get_default_dtype()"
        options = f"at::TensorOptions().dtype({dtype})"
        return [
            text if self.is_tensor(arg) else f"at::scalar_tensor({text}, {options})"
            for arg, text in zip(args, texts, strict=True)
        ]

    def _print_Function(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print the function {type(expr).__name__}")

    def _print_Basic(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")

    def _print_Derivative(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"symgrad cannot print an unevaluated derivative: {expr}")

    def emptyPrinter(self, expr: Any) -> str:
        raise UnprintableError(f"symgrad cannot print {type(expr).__name__}: {expr}")


# Nodes printed the same in any context, or (integers) as their parent computes.
_LITERALS = (sympy.Number, sympy.NumberSymbol, BooleanTrue, BooleanFalse)

# The only expression types a printed expression contains.
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
    sympy.core.relational.Relational,
    BooleanTrue,
    BooleanFalse,
)


def _is_printable(expr: Any) -> bool:
    if isinstance(expr, (int, str)):  # parts StrPrinter prints on the way
        return True
    if isinstance(expr, sympy.Number):
        return bool(expr.is_finite)
    if isinstance(expr, sympy.NumberSymbol):
        return expr in (sympy.pi, sympy.E)
    return isinstance(expr, _PRINTABLE_TYPES)


def is_double(expr: sympy.Basic) -> bool:
    """True when the number expression `expr` surely prints as a double (not an int64_t)."""
    if isinstance(expr, (sympy.Number, sympy.NumberSymbol, sympy.Pow, piecewise.Kink)):
        return True  # literals print as doubles, powers as std::pow, kinks as std::max<double>
    if isinstance(expr, (functions.ElementwiseFunction, piecewise.Where)):
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return any(is_double(arg) for arg in expr.args)
    return False


def _sum(terms: list[sympy.Basic | None], texts: list[str]) -> str:
    """Printed terms joined by + and -, as StrPrinter joins a sum (None: a call's text)."""
    parts: list[str] = []
    for term, text in zip(terms, texts, strict=True):
        is_add = term is not None and term.is_Add
        sign = "-" if text.startswith("-") and not is_add else "+"
        body = text[1:] if sign == "-" else text
        low = term is not None and precedence(term) < PRECEDENCE["Add"]
        parts += [sign, f"({body})" if is_add or low else body]
    head = "" if parts[0] == "+" else "-"
    return head + " ".join(parts[1:])
