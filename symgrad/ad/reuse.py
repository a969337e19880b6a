"""Name the forward's values inside derivatives, so the backward reads them, not rebuilds them.

After the reverse sweep, every subexpression equal to a value of the forward (whole, or
as part of a sum or product) is replaced by that value's name (Note [What the backward
saves] in symgrad.ad.schedule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sympy

from symgrad.ad.ir import Assignment
from symgrad.ad.rewrite import bottom_up
from symgrad.frontend.model import Spec


def known_values(spec: Spec, forward: Sequence[Assignment]) -> dict[sympy.Basic, sympy.Basic]:
    """Map each forward expression to the name holding its value (Note [What the backward saves]).

    An output that merely renames an intermediate (`expected: p`) takes over its
    expressions, so the backward reads the saved output instead of recomputing.
    """
    inputs = {i.symbol for i in spec.inputs}
    # A non-differentiable output carries no graph (mark_non_differentiable): a backward
    # that read it would lose its dependence on the inputs in double backward.
    constant = {o.symbol for o in spec.outputs if not o.differentiable}
    values: dict[sympy.Basic, sympy.Basic] = {}
    for assignment in forward:
        if assignment.target in constant:
            continue
        if assignment.expr not in inputs and not assignment.expr.is_Number:
            values.setdefault(assignment.expr, assignment.target)
    for expr, target in values.items():
        while target in values:
            target = values[target]
        values[expr] = target
    return _in_renamed_terms(values)


def _in_renamed_terms(values: dict[sympy.Basic, sympy.Basic]) -> dict[sympy.Basic, sympy.Basic]:
    """`values`, each also keyed as the backward spells it once renames are applied.

    The pass runs bottom up, so by the time a derivative's `num / alpha` is looked up its
    `alpha` already reads `alpha_out` (an output renaming it): the key must read so too.
    """
    renames = {k: v for k, v in values.items() if isinstance(k, sympy.Symbol)}
    if not renames:
        return values
    renamed = dict(values)
    for expr, target in values.items():
        spelled = expr.xreplace(renames)
        if spelled != target:
            renamed.setdefault(spelled, target)
    return renamed


def reuse_forward_values(expr: sympy.Expr, values: Mapping[sympy.Basic, sympy.Basic]) -> sympy.Expr:
    """Replace subexpressions equal to forward values, whole or as part of a sum or product.

    One bottom-up pass: a sum or product whose arguments include all the arguments of a
    known sum or product (E*exp(-g*t)*w contains E*exp(-g*t)) has them replaced by its
    name. Candidates are found through an index by argument, so the pass stays linear.
    """
    by_argument: dict[sympy.Basic, list[sympy.Basic]] = {}
    for value in values:
        if isinstance(value, (sympy.Add, sympy.Mul)):
            # Under each argument's unit (x for x**6): a product may hold the value's
            # powers inside larger ones (s**6 / r**7 holds u6 = s**6 / r**6).
            for key in dict.fromkeys(_unit(a) for a in value.args):
                by_argument.setdefault(key, []).append(value)

    def replace(node: sympy.Basic) -> sympy.Basic:
        if node in values:
            return values[node]
        if isinstance(node, (sympy.Add, sympy.Mul)):
            return _replace_part(node, values, by_argument)
        return node

    return bottom_up(expr, replace)


def _replace_part(
    node: sympy.Basic,
    values: Mapping[sympy.Basic, sympy.Basic],
    by_argument: Mapping[sympy.Basic, list[sympy.Basic]],
) -> sympy.Basic:
    """Replace the arguments of `node` that make up known values of the same kind.

    Repeats until nothing matches, since one replacement can complete another
    (E*exp(-g*t)*cos(p)**n -> envelope*cos(p)**n -> u). Each replacement removes at least
    one argument, so this ends.
    """
    remaining = list(node.args)
    replaced = True
    while replaced:
        replaced = False
        for arg in _candidate_keys(remaining):
            for value in by_argument.get(arg, ()):
                if value.func is not node.func:
                    continue
                rest = _without(remaining, value.args, split_powers=node.func is sympy.Mul)
                if rest is not None:
                    remaining = [*rest, values[value]]
                    replaced = True
                    break
            if replaced:
                break
    return node if remaining == list(node.args) else node.func(*remaining)


def _candidate_keys(args: list[sympy.Basic]) -> list[sympy.Basic]:
    """The arguments, and the unit powers (x or 1/x) their integer powers contain."""
    return list(dict.fromkeys([*args, *map(_unit, args)]))


def _unit(arg: sympy.Basic) -> sympy.Basic:
    """x or 1/x for an integer power of x, else the argument itself."""
    return arg.base ** sympy.sign(arg.exp) if _is_integer_power(arg) else arg


def _is_integer_power(expr: sympy.Basic) -> bool:
    """x**k with k an integer other than -1, 0 and 1: a product of |k| factors x or 1/x."""
    return isinstance(expr, sympy.Pow) and expr.exp.is_Integer and abs(expr.exp) > 1


def _split_power(power: sympy.Basic, part: sympy.Basic) -> sympy.Basic | None:
    """`power` / `part` where `part` is a power of the same base, of the same sign and
    smaller (x**3 / x = x**2, x**-2 / x**-1 = x**-1), else None."""
    if not _is_integer_power(power):
        return None
    base, exp = part.as_base_exp()
    if base != power.base or not exp.is_Integer or exp * power.exp <= 0:
        return None
    if abs(exp) >= abs(power.exp):
        return None
    return power.base ** (power.exp - exp)


def _without(
    items: list[sympy.Basic], parts: tuple[sympy.Basic, ...], split_powers: bool
) -> list[sympy.Basic] | None:
    """`items` less the multiset `parts`, or None if they are not all there.

    In a product (`split_powers`), a factor may also come out of an integer power: x out
    of x**3, and 1/x out of x**-2 (num / x inside num * x**-2).
    """
    pool = list(items)
    for part in parts:
        if part in pool:
            pool.remove(part)
            continue
        rests = ((n, _split_power(p, part)) for n, p in enumerate(pool)) if split_powers else ()
        found = next(((n, rest) for n, rest in rests if rest is not None), None)
        if found is None:
            return None
        pool[found[0]] = found[1]
    return pool
