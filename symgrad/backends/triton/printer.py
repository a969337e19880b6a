"""Print the fused loops' expressions as Triton (tl.* and libdevice) block arithmetic.

The loops and their forms are the C++ target's (Note [Fused loops] in
symgrad.backends.cpp.fused): this printer only spells them, on blocks of float32 values
that the kernel loads and converts; a function without a Triton spelling raises
UnprintableError, and the spec keeps the torch Function alone.
"""

from __future__ import annotations

import sympy

from symgrad.backends.base import UnprintableError
from symgrad.backends.cpp.vectorized import VecPrinter
from symgrad.language import functions

# Each language function on a block, as a format string over the printed argument(s).
CALLS: dict[str, str] = {
    "exp": "tl.exp({0})",
    "log": "tl.log({0})",
    "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.rsqrt({0})",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "abs": "tl.abs({0})",
    "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})",
    "erf": "tl.erf({0})",
    "sigmoid": "tl.sigmoid({0})",
    **{
        name: f"libdevice.{name}({{0}})"
        for name in (
            "expm1",
            "tan",
            "sinh",
            "cosh",
            "asin",
            "acos",
            "atan",
            "asinh",
            "acosh",
            "atanh",
            "erfc",
            "erfinv",
            "lgamma",
        )
    },
    # tl.* only where the interpreter (which runs no libdevice call) must run them:
    # log1p by Goldberg's correction, exact near 0; tanh through sigmoid, exact to an ulp
    # of 1 (as torch.compile's tanh is).
    "log1p": "_log1p({0})",
    "tanh": "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)",
    "round": "libdevice.rint({0})",
    "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, 0.0))",
    "atan2": "libdevice.atan2({0}, {1})",
    "hypot": "libdevice.hypot({0}, {1})",
}

# Integer powers written as products up to this exponent (multiplications are free
# beside the memory traffic, and the interpreter has no libdevice.pow); pow beyond.
_MAX_PRODUCT_POWER = 16


class TritonPrinter(VecPrinter):
    """Prints one Triton block expression; every symbol is a local of the same name."""

    printmethod = "_tritoncode"
    language = "Python"

    def line(self, target: str, value: str) -> str:
        """The kernel's statement that names `value` `target`."""
        return f"{target} = {value}"

    def emptyPrinter(self, expr: sympy.Basic) -> str:
        raise UnprintableError(f"{type(expr).__name__} has no Triton form")

    def _number(self, value: sympy.Basic) -> str:
        return repr(float(value))

    def _print_Infinity(self, expr: sympy.Basic) -> str:
        return self.emptyPrinter(expr)

    _print_NegativeInfinity = _print_Infinity
    _print_BooleanTrue = _print_Infinity
    _print_BooleanFalse = _print_Infinity

    def _print_Mul(self, expr: sympy.Mul) -> str:
        coefficient, rest = expr.as_coeff_Mul()
        if coefficient == -1:
            return f"-{self._print(rest)}"
        return str(super()._print_Mul(expr))

    def _print_Pow(self, expr: sympy.Pow) -> str:
        base, exponent = expr.args
        text = self._print(base)
        if exponent == sympy.Rational(1, 2):
            return f"tl.sqrt({text})"
        if exponent == sympy.Rational(-1, 2):
            return f"tl.rsqrt({text})"
        if exponent.is_Integer and 0 < int(exponent) <= _MAX_PRODUCT_POWER:
            return "(" + " * ".join([text] * int(exponent)) + ")"
        if exponent.is_Integer and -_MAX_PRODUCT_POWER <= int(exponent) < 0:
            return "(1.0 / (" + " * ".join([text] * -int(exponent)) + "))"
        return f"libdevice.pow({text}, {self._print(exponent)})"

    def _print_Not(self, expr: sympy.Basic) -> str:
        return f"({self._print(expr.args[0])} == 0)"

    def _print_Where(self, expr: sympy.Basic) -> str:
        cond, a, b = (self._print(arg) for arg in expr.args)
        return f"tl.where({cond}, {a}, {b})"

    def _print_Maximum(self, expr: sympy.Basic) -> str:
        a, b = (self._print(arg) for arg in expr.args)
        return f"tl.maximum({a}, {b})"

    def _print_Minimum(self, expr: sympy.Basic) -> str:
        a, b = (self._print(arg) for arg in expr.args)
        return f"tl.minimum({a}, {b})"

    def _print_Log1pUnit(self, expr: sympy.Basic) -> str:
        return f"_log1p({self._print(expr.args[0])})"

    def _print_Clamp(self, expr: sympy.Basic) -> str:
        x, low, high = (self._print(arg) for arg in expr.args)
        return f"tl.minimum(tl.maximum({x}, {low}), {high})"

    def _print_Function(self, expr: sympy.Basic) -> str:
        if isinstance(expr, functions.ElementwiseFunction):
            name = type(expr).__name__
            spelling = CALLS.get(name)
            if spelling is None:
                raise UnprintableError(f"{name} has no Triton form")
            return spelling.format(*(self._print(arg) for arg in expr.args))
        return str(super()._print_Function(expr))
