"""Local derivative rules: d node / d argument for the elementwise nodes of a formula.

Both sweeps use them: reverse mode (symgrad.ad.derive) multiplies them into adjoints,
forward mode (symgrad.ad.forward_mode) into tangents.

Note [Powers at zero]: the rules for `base ** exponent` follow torch's pow backward, so
gradients at base 0 are torch's, not the 0 * inf = NaN of the textbook rules:

- d/d base = exponent * base ** (exponent - 1), but 0 where the exponent is 0 (the
  textbook 0 * 0**-1 is NaN at base 0). A nonzero constant exponent needs no care;
  otherwise the exponent becomes exponent - 1 + (1 if exponent == 0 else 0), so the
  power is base**0 = 1 there and no `where` over the full-size gradient is needed;
- d/d exponent = base**exponent * log(base), but 0 where base == 0 and exponent >= 0
  (the textbook 0 * log(0) is NaN); a base known to be nonzero needs no care.
"""

from __future__ import annotations

import sympy

from symgrad.language import broadcasts, dtypes, functions, piecewise


def local_partial(node: sympy.Basic, index: int) -> sympy.Expr:
    """d node / d node.args[index], holding the other arguments fixed."""
    if isinstance(node, sympy.Add):
        return sympy.Integer(1)
    if isinstance(node, broadcasts.Broadcast):  # the witnesses lend only their shapes
        return sympy.Integer(1 if index == 0 else 0)
    if isinstance(node, sympy.Mul):
        return sympy.Mul(*node.args[:index], *node.args[index + 1 :])
    if isinstance(node, sympy.Pow):
        return _pow_partial(node, index)
    if isinstance(node, (functions.ElementwiseFunction, dtypes.FinfoEps)):
        return node.fdiff(index + 1)
    if isinstance(node, piecewise.Kink):
        partial = node.partial(index)
        if partial is not None:
            return partial
    raise TypeError(f"symgrad has no derivative rule for {type(node).__name__}: {node}")


def _pow_partial(node: sympy.Pow, index: int) -> sympy.Expr:
    """The partials of a power with torch's values at base 0 (Note [Powers at zero])."""
    base, exponent = node.args
    zero, one = sympy.Integer(0), sympy.Integer(1)
    if index == 0:
        if exponent.is_zero is False:
            return exponent * base ** (exponent - 1)
        at_zero = piecewise.where(sympy.Eq(exponent, 0), one, zero)
        return exponent * base ** (exponent - 1 + at_zero)
    slope = node * functions.call("log", base)
    if base.is_zero is False:
        return slope
    # Nested, so that a number base picks in Python and costs nothing when nonzero.
    at_zero = piecewise.where(exponent >= 0, zero, slope)
    return piecewise.where(sympy.Eq(base, 0), at_zero, slope)
