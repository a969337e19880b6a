"""The activations of torch.nn.functional as functions of the spec language.

Each is a `piecewise.Kink`: its value is printed as torch's fused call
(`torch.nn.functional.silu(x)`); its derivative is written out as torch's backward
computes it (`slope`), in language functions, so the generated backward is plain torch
and double backward works. Where torch composes the activation itself (softsign,
tanhshrink) the derivative comes from the definition (`expanded`). The first derivative
at every kink and at NaN is torch's, and so is the second away from kinks (checked point
by point in tests/test_activations.py):

- elu, celu, selu: the negative branch at 0 (elu'(0) = alpha), the positive one at NaN;
- leaky_relu: the slope at 0 and at NaN;
- hardtanh, relu6: 0 at both bounds, 1 at NaN;
- hardsigmoid: 0 at -3 and 3 and at NaN; hardswish: 0 at -3, 1 at 3 and at NaN;
- softshrink, hardshrink: 0 at -lambd and lambd, 1 at NaN.

Parameters (alpha, negative_slope, min_val, max_val, lambd) are numbers, as torch takes
them: constants or number inputs, positional or by torch's keyword, with torch's defaults.
"""

from __future__ import annotations

import sympy

from symgrad.language import functions
from symgrad.language.activation_base import Activation as Activation  # re-exported
from symgrad.language.activation_base import constant_parameter
from symgrad.language.losses import Huber, SmoothL1
from symgrad.language.piecewise import Ge, Gt, Le, Lt, where

_HALF = sympy.Rational(1, 2)
_ZERO = sympy.Integer(0)
_ONE = sympy.Integer(1)
# gelu's tanh approximation: tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)).
_BETA = sympy.sqrt(2 / sympy.pi)
_KAPPA = sympy.Float("0.044715")

# torch's SELU constants (Klambauer et al., 2017), as torch.nn.functional.selu has them.
SELU_ALPHA = sympy.Float("1.6732632423543772848170429916717", 30)
SELU_SCALE = sympy.Float("1.0507009873554804934193349852946", 30)


def _sigmoid(x: sympy.Expr) -> sympy.Expr:
    return functions.call("sigmoid", x)


class Silu(Activation):
    name, torch_function, nargs = "silu", "torch.nn.functional.silu", 1

    def expanded(self) -> sympy.Expr:
        return self.input * functions.call("sigmoid", self.input)

    def slope(self) -> sympy.Expr:
        s = _sigmoid(self.input)
        return s * (1 + self.input * (1 - s))


class Mish(Activation):
    name, torch_function, nargs = "mish", "torch.nn.functional.mish", 1

    def expanded(self) -> sympy.Expr:
        x = self.input
        return x * functions.call("tanh", functions.call("softplus", x))

    def slope(self) -> sympy.Expr:
        x = self.input
        t = functions.call("tanh", functions.call("softplus", x))
        return t + x * _sigmoid(x) * (1 - t**2)


class Gelu(Activation):
    name, torch_function, nargs = "gelu", "torch.nn.functional.gelu", 1

    def expanded(self) -> sympy.Expr:
        x = self.input
        return x * (1 + functions.call("erf", x / sympy.sqrt(2))) / 2

    def slope(self) -> sympy.Expr:
        x = self.input
        cdf = (1 + functions.call("erf", x / sympy.sqrt(2))) / 2
        return cdf + x * functions.call("exp", -(x**2) / 2) / sympy.sqrt(2 * sympy.pi)


class GeluTanh(Activation):
    """gelu(x, approximate="tanh")."""

    name, torch_function, nargs = "gelu_tanh", "torch.nn.functional.gelu", 1
    torch_options = 'approximate="tanh"'

    def expanded(self) -> sympy.Expr:
        x = self.input
        inner = _BETA * (x + _KAPPA * x**3)
        return _HALF * x * (1 + functions.call("tanh", inner))

    def slope(self) -> sympy.Expr:
        x = self.input
        t = functions.call("tanh", _BETA * (x + _KAPPA * x**3))
        return _HALF * (1 + t) + _HALF * x * (1 - t**2) * _BETA * (1 + 3 * _KAPPA * x**2)


class Softsign(Activation):
    name, torch_function, nargs = "softsign", "torch.nn.functional.softsign", 1

    def expanded(self) -> sympy.Expr:
        return self.input / (1 + functions.call("abs", self.input))


class Tanhshrink(Activation):
    name, torch_function, nargs = "tanhshrink", "torch.nn.functional.tanhshrink", 1

    def expanded(self) -> sympy.Expr:
        return self.input - functions.call("tanh", self.input)


def _elu(x: sympy.Expr, alpha: sympy.Expr, input_scale: sympy.Expr = 1) -> sympy.Expr:
    """torch's elu family: x above 0; alpha * expm1(x * input_scale) at 0 and below."""
    return where(Le(x, 0), alpha * functions.call("expm1", x * input_scale), x)


def _elu_slope(x: sympy.Expr, alpha: sympy.Expr, input_scale: sympy.Expr = 1) -> sympy.Expr:
    """d elu / dx as torch has it: alpha at 0 itself, 1 at NaN, and a second derivative
    of 0 at 0 (torch's double backward masks x < 0). The exp is evaluated at 0 where its
    branch is not taken, so it cannot overflow into the second derivative (0 * inf)."""
    below = Lt(x, 0)
    safe = where(below, x, _ZERO)
    slope = alpha * input_scale * functions.call("exp", safe * input_scale)
    return where(below, slope, where(Le(x, 0), alpha * input_scale, _ONE))


class Elu(Activation):
    name, torch_function, nargs = "elu", "torch.nn.functional.elu", 2
    parameters = (("alpha", 1.0),)

    def expanded(self) -> sympy.Expr:
        return _elu(*self.args)

    def slope(self) -> sympy.Expr:
        return _elu_slope(*self.args)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, _ZERO)]


class Celu(Activation):
    name, torch_function, nargs = "celu", "torch.nn.functional.celu", 2
    parameters = (("alpha", 1.0),)

    def expanded(self) -> sympy.Expr:
        x, alpha = self.args
        return _elu(x, alpha, 1 / alpha)

    def slope(self) -> sympy.Expr:
        x, alpha = self.args
        return _elu_slope(x, alpha, 1 / alpha)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, _ZERO)]

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        return "celu's alpha cannot be 0" if constant_parameter(values[0]) == 0 else None


class Selu(Activation):
    name, torch_function, nargs = "selu", "torch.nn.functional.selu", 1

    def expanded(self) -> sympy.Expr:
        return SELU_SCALE * _elu(self.input, SELU_ALPHA)

    def slope(self) -> sympy.Expr:
        return SELU_SCALE * _elu_slope(self.input, SELU_ALPHA)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, _ZERO)]


class LeakyRelu(Activation):
    name, torch_function, nargs = "leaky_relu", "torch.nn.functional.leaky_relu", 2
    parameters = (("negative_slope", 0.01),)

    def expanded(self) -> sympy.Expr:
        x, slope = self.args
        return where(Gt(x, 0), x, slope * x)

    def slope(self) -> sympy.Expr:
        x, slope = self.args
        return where(Gt(x, 0), _ONE, slope)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, _ZERO)]


def _hardtanh(x: sympy.Expr, low: sympy.Expr, high: sympy.Expr) -> sympy.Expr:
    """x strictly between the bounds, the bound (gradient 0) at and beyond them."""
    return where(Le(x, low), low, where(Ge(x, high), high, x))


def _hardtanh_slope(x: sympy.Expr, low: sympy.Expr, high: sympy.Expr) -> sympy.Expr:
    return where(Le(x, low), _ZERO, where(Ge(x, high), _ZERO, _ONE))


class Hardtanh(Activation):
    name, torch_function, nargs = "hardtanh", "torch.nn.functional.hardtanh", 3
    parameters = (("min_val", -1.0), ("max_val", 1.0))

    def expanded(self) -> sympy.Expr:
        return _hardtanh(*self.args)

    def slope(self) -> sympy.Expr:
        return _hardtanh_slope(*self.args)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        x, low, high = self.args
        return [(x, low), (x, high)]

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        low, high = (constant_parameter(value) for value in values)
        if low is not None and high is not None and low > high:
            return "hardtanh's min_val cannot be greater than max_val"
        return None


class Relu6(Activation):
    name, torch_function, nargs = "relu6", "torch.nn.functional.relu6", 1

    def expanded(self) -> sympy.Expr:
        return _hardtanh(self.input, _ZERO, sympy.Integer(6))

    def slope(self) -> sympy.Expr:
        return _hardtanh_slope(self.input, _ZERO, sympy.Integer(6))

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, _ZERO), (self.input, sympy.Integer(6))]


class Hardsigmoid(Activation):
    name, torch_function, nargs = "hardsigmoid", "torch.nn.functional.hardsigmoid", 1

    def expanded(self) -> sympy.Expr:
        x = self.input
        inside = sympy.And(Gt(x, -3), Lt(x, 3))
        return where(inside, x / 6 + _HALF, where(Le(x, -3), _ZERO, sympy.Integer(1)))

    def slope(self) -> sympy.Expr:
        x = self.input
        return where(sympy.And(Gt(x, -3), Lt(x, 3)), sympy.Rational(1, 6), _ZERO)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, sympy.Integer(-3)), (self.input, sympy.Integer(3))]


class Hardswish(Activation):
    name, torch_function, nargs = "hardswish", "torch.nn.functional.hardswish", 1

    def expanded(self) -> sympy.Expr:
        x = self.input
        return where(Le(x, -3), _ZERO, where(Lt(x, 3), x * (x + 3) / 6, x))

    def slope(self) -> sympy.Expr:
        x = self.input
        return where(Le(x, -3), _ZERO, where(Lt(x, 3), x / 3 + _HALF, _ONE))

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        return [(self.input, sympy.Integer(-3)), (self.input, sympy.Integer(3))]


def _dead_zone(x: sympy.Expr, lambd: sympy.Expr) -> sympy.Boolean:
    return sympy.And(Ge(x, -lambd), Le(x, lambd))


class _Shrink(Activation):
    nargs = 2
    parameters = (("lambd", 0.5),)

    def slope(self) -> sympy.Expr:
        x, lambd = self.args
        return where(_dead_zone(x, lambd), _ZERO, _ONE)

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        x, lambd = self.args
        return [(x, -lambd), (x, lambd)]

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        lambd = constant_parameter(values[0])
        return f"{cls.name}'s lambd must be at least 0" if lambd is not None and lambd < 0 else None


class Softshrink(_Shrink):
    name, torch_function = "softshrink", "torch.nn.functional.softshrink"

    def expanded(self) -> sympy.Expr:
        x, lambd = self.args
        return where(_dead_zone(x, lambd), _ZERO, x - lambd * functions.call("sign", x))


class Hardshrink(_Shrink):
    name, torch_function = "hardshrink", "torch.nn.functional.hardshrink"

    def expanded(self) -> sympy.Expr:
        x, lambd = self.args
        return where(_dead_zone(x, lambd), _ZERO, x)


# Every activation by its language name.
ACTIVATIONS: dict[str, type[Activation]] = {
    cls.name: cls
    for cls in (
        Silu,
        Mish,
        Gelu,
        GeluTanh,
        Softsign,
        Tanhshrink,
        Elu,
        Celu,
        Selu,
        LeakyRelu,
        Hardtanh,
        Relu6,
        Hardsigmoid,
        Hardswish,
        Softshrink,
        Hardshrink,
        Huber,
        SmoothL1,
    )
}

# Other accepted spellings (sympy's and torch's names).
ACTIVATION_ALIASES = {"swish": "silu", "hard_swish": "hardswish", "hard_sigmoid": "hardsigmoid"}

# gelu(x, approximate=...) as torch spells it -> the language function.
GELU_APPROXIMATIONS = {"none": "gelu", "tanh": "gelu_tanh"}
