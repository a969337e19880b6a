"""Layer normalisation over the last dim: `layer_norm(x, eps)`, torch's native_layer_norm.

Note [Layer norm]: `layer_norm(x, eps)` is xhat = (x - mean(x)) * rstd with rstd =
1 / sqrt(var(x) + eps), mean and biased variance over the last dim, kept. It is two
nodes: `LayerNorm(x, rstd, eps)`, the full-size xhat, reads `LayerNormRstd(x, eps)`, the
per-row rstd, as an argument, so that the forward names rstd apart (a reduction, hoisted
like any) and the backward reads it as a residual (Note [Residuals] in
symgrad.ad.residuals), as torch's own layer norm saves it. Their derivatives are written
with the nodes themselves, so the backward reads xhat and rstd and never x:

- xhat pulls g back to x as rstd * (g - mean(g) - xhat * mean(g * xhat)); the rstd
  argument gets no adjoint of its own, the rule already covering x's path through it;
- rstd pulls g back to x as -rstd**2 * xhat * g / N (N the last dim's size).

Both are built of differentiable nodes, so double backward differentiates them exactly;
the tangents are the same expressions with the tangent for g (summed for rstd's).
The affine `xhat * w + b` stays arithmetic (one addcmul).
"""

from __future__ import annotations

from typing import Any

import sympy

from symgrad.language import functions, reductions

# The spelling in the spec language.
LAYER_NORM = "layer_norm"
# The dim a layer norm normalises over: the last one, always.
_LAST = (-1,)


def _mean(value: sympy.Expr) -> sympy.Expr:
    """mean(value, dim=-1, keepdim=True)."""
    return reductions.reduce("mean", value, _LAST, keepdim=True)


class LayerNormRstd(reductions.Reduction):
    """`LayerNormRstd(x, eps)`: 1 / sqrt(var(x, -1, correction=0, keepdim) + eps), per row."""

    name = "layer_norm_rstd"

    @property
    def keepdim(self) -> bool:
        return True

    @property
    def dims(self) -> tuple[int, ...]:
        return _LAST

    @property
    def eps(self) -> sympy.Expr:
        result: sympy.Expr = self.args[1]
        return result

    def expanded(self) -> sympy.Expr:
        """The written formula: rsqrt(mean((x - mean(x))**2) + eps)."""
        x = self.argument
        return functions.call("rsqrt", _mean((x - _mean(x)) ** 2) + self.eps)

    def argument_adjoint(self, adjoint: sympy.Expr) -> sympy.Expr:
        """-rstd**2 * xhat * g / N: d rstd / d x is -rstd**3 (x - mean(x)) / N."""
        xhat = LayerNorm(self.argument, self, self.eps)
        return -(self**2) * xhat * adjoint / reductions.Count(self.argument, *_LAST)

    def tangent(self, tangent: sympy.Expr) -> sympy.Expr:
        """-rstd**2 * mean(xhat * t): the adjoint's rule, summed over the row."""
        xhat = LayerNorm(self.argument, self, self.eps)
        return -(self**2) * _mean(xhat * tangent)

    def _sympystr(self, printer: Any) -> str:
        return f"layer_norm_rstd({printer._print(self.argument)}, {printer._print(self.eps)})"


class LayerNorm(reductions.Normalization):
    """`LayerNorm(x, rstd, eps)`: xhat = (x - mean(x)) * rstd over the last dim, where rstd
    is `LayerNormRstd(x, eps)` or the name of it (Note [Layer norm])."""

    name = LAYER_NORM

    @property
    def dim(self) -> int:
        return _LAST[0]

    @property
    def rstd(self) -> sympy.Expr:
        result: sympy.Expr = self.args[1]
        return result

    @property
    def eps(self) -> sympy.Expr:
        result: sympy.Expr = self.args[2]
        return result

    def expanded(self) -> sympy.Expr:
        """The written formula: (x - mean(x)) * rstd."""
        return (self.argument - _mean(self.argument)) * self.rstd

    def argument_adjoint(self, adjoint: sympy.Expr) -> sympy.Expr:
        """rstd * (g - mean(g) - xhat * mean(g * xhat)), g the adjoint in xhat's shape."""
        return self.rstd * (adjoint - _mean(adjoint) - self * _mean(adjoint * self))

    def tangent(self, tangent: sympy.Expr) -> sympy.Expr:
        """The same linear map on the tangent: it is symmetric."""
        return self.argument_adjoint(tangent)

    def _sympystr(self, printer: Any) -> str:
        return f"layer_norm({printer._print(self.argument)}, {printer._print(self.eps)})"


NODES = (LayerNorm, LayerNormRstd)


def layer_norm(x: sympy.Expr, eps: sympy.Expr) -> LayerNorm:
    """Build `layer_norm(x, eps)`: xhat reading its own rstd node."""
    return LayerNorm(x, LayerNormRstd(x, eps), eps)
