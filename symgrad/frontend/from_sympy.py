"""Accept sympy expressions from the Python API: rebuilt over the language's own nodes."""

from __future__ import annotations

from collections.abc import Mapping

import sympy
from sympy.core.relational import Relational

from symgrad.errors import Location, SpecError, did_you_mean
from symgrad.frontend.calls import arity_message
from symgrad.language import functions, piecewise


def from_sympy(
    expr: sympy.Basic, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Expr:
    """Rebuild a user-given sympy expression over the spec's symbols and functions."""
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        expr = sympy.sympify(expr)
    if not isinstance(expr, sympy.Basic):
        raise SpecError(location, f"expected an expression, got {type(expr).__name__}")
    if isinstance(expr, sympy.Symbol):
        if expr.name not in symbols:
            hint = did_you_mean(expr.name, symbols)
            raise SpecError(location, f"unknown name {expr.name!r}{hint}")
        return symbols[expr.name]
    if isinstance(expr, sympy.NumberSymbol) and expr in (sympy.pi, sympy.E):
        return expr
    if isinstance(expr, sympy.Number):
        if not expr.is_finite:
            raise SpecError(location, f"constant {expr} is not a finite number")
        return expr
    if isinstance(expr, sympy.Piecewise):
        return _from_sympy_piecewise(expr, symbols, location)
    if isinstance(expr, (sympy.Max, sympy.Min)) and len(expr.args) == 2:
        kind = piecewise.Maximum if isinstance(expr, sympy.Max) else piecewise.Minimum
        result: sympy.Expr = kind(*(from_sympy(a, symbols, location) for a in expr.args))
        return result
    if isinstance(expr, piecewise.Kink):
        return type(expr)(*(from_sympy(a, symbols, location) for a in expr.args))
    if isinstance(expr, sympy.Function) and type(expr).__name__ in functions.SPELLINGS:
        info = functions.FUNCTIONS[functions.SPELLINGS[type(expr).__name__]]
        if len(expr.args) != info.arity:
            raise SpecError(location, arity_message(info.name, info.arity, len(expr.args)))
    elif not isinstance(expr, (sympy.Add, sympy.Mul, sympy.Pow)):
        raise SpecError(location, f"unsupported sympy expression {type(expr).__name__}: {expr}")
    args = [from_sympy(arg, symbols, location) for arg in expr.args]
    if isinstance(expr, sympy.Add):
        return sympy.Add(*args)
    if isinstance(expr, sympy.Mul):
        return sympy.Mul(*args)
    if isinstance(expr, sympy.Pow):
        return functions.call("exp", args[1]) if args[0] == sympy.E else sympy.Pow(*args)
    if isinstance(expr, sympy.sinc):  # sympy's is sin(x)/x; the language's is torch's
        return functions.call("sinc", args[0] / sympy.pi)
    return functions.call(type(expr).__name__, *args)


def _from_sympy_piecewise(
    expr: sympy.Piecewise, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Expr:
    """sympy's Piecewise as nested where(); it must end with a (value, True) case."""
    *cases, (last_value, last_condition) = expr.args
    if last_condition is not sympy.true:
        raise SpecError(location, "Piecewise needs a last case (value, True)")
    result = from_sympy(last_value, symbols, location)
    for value, condition in reversed(cases):
        result = piecewise.where(
            _condition_from_sympy(condition, symbols, location),
            from_sympy(value, symbols, location),
            result,
        )
    return result


def _condition_from_sympy(
    condition: sympy.Basic, symbols: Mapping[str, sympy.Symbol], location: Location
) -> sympy.Basic:
    if isinstance(condition, Relational):
        lhs, rhs = (from_sympy(side, symbols, location) for side in condition.args)
        return piecewise.compare(type(condition), lhs, rhs)
    if isinstance(condition, (sympy.And, sympy.Or, sympy.Not)):
        return type(condition)(
            *(_condition_from_sympy(a, symbols, location) for a in condition.args)
        )
    raise SpecError(location, f"unsupported condition {type(condition).__name__}: {condition}")
