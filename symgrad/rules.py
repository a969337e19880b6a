"""Local derivative rules: d node / d argument for the elementwise nodes of a formula.

Both sweeps use them: reverse mode (symgrad.derive) multiplies them into adjoints,
forward mode (symgrad.forward_mode) into tangents.
"""

from __future__ import annotations

import sympy

from symgrad import functions


def local_partial(node: sympy.Basic, index: int) -> sympy.Expr:
    """d node / d node.args[index], holding the other arguments fixed."""
    if isinstance(node, sympy.Add):
        return sympy.Integer(1)
    if isinstance(node, sympy.Mul):
        return sympy.Mul(*node.args[:index], *node.args[index + 1 :])
    if isinstance(node, sympy.Pow):
        base, exponent = node.args
        if index == 0:
            return exponent * base ** (exponent - 1)
        return node * functions.call("log", base)
    if isinstance(node, functions.ElementwiseFunction):
        return node.fdiff(index + 1)
    raise TypeError(f"symgrad has no derivative rule for {type(node).__name__}: {node}")
