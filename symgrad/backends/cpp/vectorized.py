"""Print IR expressions as at::vec::Vectorized arithmetic, for the fused CPU loops.

Inside a fused loop (Note [Fused loops] in symgrad.backends.cpp.fused) every value is a
`Vec`, an at::vec::Vectorized<scalar_t> of consecutive elements: tensors are loaded into
one and numbers are broadcast into one, so the printer never asks which is which.
Conditions are masks (all bits set where true), as Vectorized's comparisons return them.
Activations, kinks and pullbacks print as their definitions (`expanded()`), so a loop
calls no torch kernel; a function without a Vectorized spelling raises UnprintableError,
and the spec keeps the ATen Function.
"""

from __future__ import annotations

from typing import Any, ClassVar

import sympy
from sympy.printing.codeprinter import CodePrinter

from symgrad.backends.base import UnprintableError
from symgrad.language import activations, functions, piecewise, pullbacks

# Each language function on a Vec, as a format string over the printed argument(s).
# The helpers `vec_*` are defined by the template (fused.cpp.jinja), in the namespace
# `{ns}` stands for (Note [Generated names] in symgrad.backends.cpp.names).
CALLS: dict[str, str] = {
    "exp": "{ns}vec_exp({0})",
    "log": "{0}.log()",
    "log1p": "{0}.log1p()",
    "expm1": "{0}.expm1()",
    "sqrt": "{0}.sqrt()",
    "rsqrt": "{0}.rsqrt()",
    "sin": "{0}.sin()",
    "cos": "{0}.cos()",
    "tan": "{0}.tan()",
    "tanh": "{0}.tanh()",
    "sinh": "{0}.sinh()",
    "cosh": "{0}.cosh()",
    "asin": "{0}.asin()",
    "acos": "{0}.acos()",
    "atan": "{0}.atan()",
    "asinh": "{0}.asinh()",
    "acosh": "{0}.acosh()",
    "atanh": "{0}.atanh()",
    "erf": "{0}.erf()",
    "erfc": "{0}.erfc()",
    "erfinv": "{0}.erfinv()",
    "lgamma": "{0}.lgamma()",
    "digamma": "{0}.digamma()",
    "abs": "{0}.abs()",
    "floor": "{0}.floor()",
    "ceil": "{0}.ceil()",
    "round": "{0}.round()",
    "sigmoid": "{ns}vec_sigmoid({0})",
    "softplus": "{ns}vec_softplus({0})",
    "log_sigmoid": "{ns}vec_log_sigmoid({0})",
    "sign": "{ns}vec_sign({0})",
    "atan2": "{0}.atan2({1})",
    "hypot": "{0}.hypot({1})",
}

# Powers written as products up to this exponent; pow() beyond.
_MAX_PRODUCT_POWER = 4


class VecPrinter(CodePrinter):
    """Prints one Vectorized expression; every symbol is a Vec local of the same name."""

    printmethod = "_veccode"
    language = "C++"
    _default_settings: ClassVar[dict[str, Any]] = {
        **CodePrinter._default_settings,
        "strict": False,
    }

    def __init__(self, renames: dict[sympy.Basic, str] | None = None, helpers: str = "") -> None:
        super().__init__()
        self.renames = renames or {}
        # What the helpers' names are qualified with: `detail::`.
        self.helpers = helpers

    def doprint(self, expr: sympy.Basic, assign_to: None = None) -> str:
        return str(self._print(expr))

    def line(self, target: str, value: str) -> str:
        """The loop's statement that names `value` `target`."""
        return f"const Vec {target} = {value};"

    def emptyPrinter(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"{type(expr).__name__} has no fused CPU form")

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return str(self.renames.get(expr, expr.name))

    def _number(self, value: sympy.Basic) -> str:
        return f"Vec(static_cast<scalar_t>({float(value)!r}))"

    def _print_Integer(self, expr: sympy.Integer) -> str:
        return self._number(expr)

    _print_Rational = _print_Integer
    _print_Float = _print_Integer
    _print_Pi = _print_Integer
    _print_Exp1 = _print_Integer

    def _print_NumberSymbol(self, expr: sympy.Basic) -> str:
        return self._number(expr)

    def _print_Infinity(self, expr: sympy.Basic) -> str:
        return "Vec(std::numeric_limits<scalar_t>::infinity())"

    def _print_NegativeInfinity(self, expr: sympy.Basic) -> str:
        return "Vec(-std::numeric_limits<scalar_t>::infinity())"

    def _print_BooleanTrue(self, expr: sympy.Basic) -> str:
        return "(Vec(0) == Vec(0))"

    def _print_BooleanFalse(self, expr: sympy.Basic) -> str:
        return "(Vec(0) != Vec(0))"

    def _print_Add(self, expr: sympy.Add) -> str:
        terms = list(expr.as_ordered_terms())
        text = self._print(terms[0])
        for term in terms[1:]:
            coefficient, rest = term.as_coeff_Mul()
            if coefficient.is_negative:
                text = f"{text} - {self._print(-coefficient * rest)}"
            else:
                text = f"{text} + {self._print(term)}"
        return f"({text})"

    def _print_Mul(self, expr: sympy.Mul) -> str:
        coefficient, rest = expr.as_coeff_Mul()
        if coefficient == -1:
            return f"{self._print(rest)}.neg()"
        numerator, denominator = [], []
        for factor in sympy.Mul.make_args(expr):
            base, exponent = factor.as_base_exp()
            if exponent.is_Number and exponent.is_negative and factor.is_Pow:
                denominator.append(base if exponent == -1 else sympy.Pow(base, -exponent))
            else:
                numerator.append(factor)
        top = " * ".join(self._print(f) for f in numerator) if numerator else self._number(1)
        if not denominator:
            return f"({top})"
        bottom = " * ".join(self._print(f) for f in denominator)
        return f"({top} / {bottom})" if len(denominator) == 1 else f"({top} / ({bottom}))"

    def _print_Pow(self, expr: sympy.Pow) -> str:
        base, exponent = expr.args
        text = self._print(base)
        if exponent == sympy.Rational(1, 2):
            return f"{text}.sqrt()"
        if exponent == sympy.Rational(-1, 2):
            return f"{text}.rsqrt()"
        if exponent.is_Integer and 0 < int(exponent) <= _MAX_PRODUCT_POWER:
            return "(" + " * ".join([text] * int(exponent)) + ")"
        if exponent.is_Integer and -_MAX_PRODUCT_POWER <= int(exponent) < 0:
            return "(" + " * ".join([text] * -int(exponent)) + ").reciprocal()"
        if exponent.is_Integer:  # by squaring: Vectorized's pow is a slow exp(log)
            power = f"{self.helpers}vec_ipow({text}, {abs(int(exponent))})"
            return power if exponent > 0 else f"{power}.reciprocal()"
        return f"{text}.pow({self._print(exponent)})"

    def _print_Relational(self, expr: sympy.Basic) -> str:
        lhs, rhs = (self._print(side) for side in expr.args)
        return f"({lhs} {expr.rel_op} {rhs})"

    def _print_And(self, expr: sympy.Basic) -> str:
        return "(" + " & ".join(self._print(arg) for arg in expr.args) + ")"

    def _print_Or(self, expr: sympy.Basic) -> str:
        return "(" + " | ".join(self._print(arg) for arg in expr.args) + ")"

    def _print_Not(self, expr: sympy.Basic) -> str:
        return f"{self.helpers}vec_not({self._print(expr.args[0])})"

    def _print_Where(self, expr: piecewise.Where) -> str:
        cond, a, b = (self._print(arg) for arg in expr.args)
        return f"Vec::blendv({b}, {a}, {cond})"

    def _print_Maximum(self, expr: sympy.Basic) -> str:
        a, b = (self._print(arg) for arg in expr.args)
        return f"at::vec::maximum({a}, {b})"

    def _print_Minimum(self, expr: sympy.Basic) -> str:
        a, b = (self._print(arg) for arg in expr.args)
        return f"at::vec::minimum({a}, {b})"

    def _print_Log1pUnit(self, expr: sympy.Basic) -> str:
        return f"{self.helpers}vec_log1p_unit({self._print(expr.args[0])})"

    def _print_Clamp(self, expr: sympy.Basic) -> str:
        x, low, high = (self._print(arg) for arg in expr.args)
        return f"at::vec::clamp({x}, {low}, {high})"

    def _print_Function(self, expr: sympy.Basic) -> str:
        if isinstance(expr, functions.ElementwiseFunction):
            name = type(expr).__name__
            spelling = CALLS.get(name)
            if spelling is None:
                raise UnprintableError(f"{name} has no fused CPU form")
            return spelling.format(*(self._print(arg) for arg in expr.args), ns=self.helpers)
        if isinstance(expr, (activations.Activation, piecewise.Kink, pullbacks.Pullback)):
            return str(self._print(expr.expanded()))
        return self.emptyPrinter(expr)
