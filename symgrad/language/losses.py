"""torch's elementwise losses huber and smooth_l1 as functions of the spec language.

Each takes the difference d = a - b of torch's loss of `a` against `b` (reduction none)
and a number parameter: forward torch's kernel (Note [Losses of a difference] in
symgrad.backends.forms.losses), backward one clamp times the gradient, whose own
derivative is clamp's mask (1 on the bounds, where torch's double backward gives 0).
A parameter outside torch's domain (delta <= 0, beta < 0: torch raises) gives the
definition's values and slopes, chosen in Python once per call.
"""

from __future__ import annotations

import sympy

from symgrad.language import functions, piecewise
from symgrad.language.activation_base import Activation, constant_parameter
from symgrad.language.piecewise import Ge, Gt, Lt, where

_HALF = sympy.Rational(1, 2)
_ZERO = sympy.Integer(0)
_ONE = sympy.Integer(1)


class PointwiseLoss(Activation):
    """An elementwise loss of a difference d (torch's loss of `a` against `b` = a - d,
    reduction="none"); its parameter is a number (a tensor one prints the definition)."""

    nargs = 2
    torch_options = 'reduction="none"'

    def partial(self, index: int) -> sympy.Expr | None:
        """The slope; by a tensor parameter, the definition's (its kernel takes numbers)."""
        return self.slope() if index == 0 else self.by_parameter()

    def by_parameter(self) -> sympy.Expr:
        raise NotImplementedError

    def domain(self) -> sympy.Basic:
        """Where torch's kernel takes the parameter; elsewhere the definition is printed."""
        raise NotImplementedError


class Huber(PointwiseLoss):
    """Huber's loss: 0.5 d**2 inside |d| < delta, linear (slope delta) outside."""

    name, torch_function = "huber", "torch.nn.functional.huber_loss"
    parameters = (("delta", 1.0),)

    def expanded(self) -> sympy.Expr:
        d, delta = self.args
        a = functions.call("abs", d)
        return where(Lt(a, delta), _HALF * d**2, delta * (a - _HALF * delta))

    def slope(self) -> sympy.Expr:
        """clamp(d, -delta, delta): one op; its own derivative is a mask (double backward)."""
        d, delta = self.args
        return piecewise.Clamp(d, -delta, delta) if delta.is_positive else HuberSlope(d, delta)

    def domain(self) -> sympy.Basic:
        return sympy.true if self.args[1].is_positive else Gt(self.args[1], 0)

    def by_parameter(self) -> sympy.Expr:
        d, delta = self.args
        a = functions.call("abs", d)
        return where(Lt(a, delta), _ZERO, a - delta)

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        delta = constant_parameter(values[0])
        return "huber's delta must be positive" if delta is not None and delta <= 0 else None


class SmoothL1(PointwiseLoss):
    """smooth-L1: huber(d, beta) / beta, and |d| at beta = 0 (as torch)."""

    name, torch_function = "smooth_l1", "torch.nn.functional.smooth_l1_loss"
    parameters = (("beta", 1.0),)

    def expanded(self) -> sympy.Expr:
        d, beta = self.args
        a = functions.call("abs", d)
        return where(Lt(a, beta), _HALF * d**2 / beta, a - _HALF * beta)

    def slope(self) -> sympy.Expr:
        """clamp(d / beta, -1, 1); sign(d) where beta is 0, torch's gradient there."""
        d, beta = self.args
        if beta.is_positive:
            return piecewise.Clamp(d / beta, -_ONE, _ONE)
        if beta.is_zero:
            return functions.call("sign", d)
        return SmoothL1Slope(d, beta)

    def by_parameter(self) -> sympy.Expr:
        d, beta = self.args
        return where(Lt(functions.call("abs", d), beta), -_HALF * d**2 / beta**2, -_HALF)

    def domain(self) -> sympy.Basic:
        return sympy.true if self.args[1].is_nonnegative else Ge(self.args[1], 0)

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        beta = constant_parameter(values[0])
        return "smooth_l1's beta must be at least 0" if beta is not None and beta < 0 else None


class LossSlope(piecewise.Kink):
    """A loss's slope by a number parameter that may be outside the kernel's domain: its
    two forms chosen in Python once per call, as torch's smooth_l1_loss decides beta = 0
    (a `where` would build a tensor of the condition and run both forms per call)."""

    nargs = 2

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        d, parameter = self.args
        return [(d, -parameter), (d, parameter)]


class HuberSlope(LossSlope):
    """d huber(d, delta) / d d: clamp(d, -delta, delta), delta * sign(d) for delta <= 0."""

    name = "huber_slope"

    def expanded(self) -> sympy.Expr:
        d, delta = self.args
        clamped = piecewise.Clamp(d, -delta, delta)
        return where(Gt(delta, 0), clamped, delta * functions.call("sign", d))


class SmoothL1Slope(LossSlope):
    """d smooth_l1(d, beta) / d d: clamp(d / beta, -1, 1), sign(d) for beta <= 0."""

    name = "smooth_l1_slope"

    def expanded(self) -> sympy.Expr:
        d, beta = self.args
        clamped = piecewise.Clamp(d / beta, -_ONE, _ONE)
        return where(Gt(beta, 0), clamped, functions.call("sign", d))
