"""Recognise the stable idioms of smooth functions, so the smooth function is differentiated.

`relu(z) + log1p(exp(-abs(z)))` is how careful code writes softplus(z): finite at any z.
Differentiated term by term it is wrong at z = 0, where relu'(0) = 0 and |z|'(0) = 0 are
each torch's convention but softplus'(0) = 1/2: the function is smooth there, its two
kinks cancel. So the idiom is replaced by the function it computes, and the function's
own derivative rule is used. Each rule is an identity (values change only by rounding):

| written (any coefficient c on both terms)          | emitted                       |
| -------------------------------------------------- | ----------------------------- |
| c max(a, b) + c softplus(-abs(a - b))              | c logaddexp(a, b)             |
| c min(a, b) - c softplus(-abs(a - b))              | -c logaddexp(-a, -b)          |
| relu(u) for max(u, 0); a 0 argument of logaddexp   | softplus(u)                   |
| c softplus(-u), c < 0                              | -c log_sigmoid(u)             |
| c softplus(u) - c softplus(-u) (or log_sigmoid)   | c u                           |

`log1p(exp(v))` and `log(1 + exp(v))` already read softplus(v) here (symgrad.ad.stable),
so `max(u, 0) + log(1 + exp(-abs(u)))` is matched too, and `min(u, 0) - log1p(...)` ends
as log_sigmoid(u). Patterns are matched through `where` names (`View`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sympy

from symgrad.language import functions, piecewise


class View:
    """A node as a pattern sees it: a `where` name stands for its definition."""

    def __init__(self, definitions: Mapping[sympy.Basic, sympy.Expr]) -> None:
        self.definitions = definitions

    def __call__(self, node: sympy.Basic) -> sympy.Basic:
        """`node`, or the definition of the intermediate it names (followed to the end)."""
        while isinstance(node, sympy.Symbol) and node in self.definitions:
            node = self.definitions[node]
        return node

    def argument(self, node: sympy.Basic, name: str) -> sympy.Expr | None:
        """u when `node` is (or names) the call name(u) of a language function."""
        seen = self(node)
        if is_call(seen, name):
            result: sympy.Expr = seen.args[0]
            return result
        return None

    def same(self, a: sympy.Basic, b: sympy.Basic) -> bool:
        """Whether a and b are the same value, as written or through their names."""
        return bool(a == b or self(a) == self(b))


def is_call(node: sympy.Basic, name: str) -> bool:
    """Whether `node` is a call of the language function `name`."""
    return type(node).__name__ == name and isinstance(node, functions.ElementwiseFunction)


@dataclass(frozen=True)
class _Kink:
    """A term c * max(a, b) (or min): one half of an idiom."""

    term: sympy.Expr
    coefficient: sympy.Expr
    is_max: bool
    a: sympy.Expr
    b: sympy.Expr


def _kink(term: sympy.Expr, view: View) -> _Kink | None:
    coefficient, core = term.as_coeff_Mul()
    seen = view(core)
    if isinstance(seen, piecewise.Relu):
        return _Kink(term, coefficient, True, seen.args[0], sympy.Integer(0))
    if isinstance(seen, (piecewise.Maximum, piecewise.Minimum)):
        a, b = seen.args
        return _Kink(term, coefficient, isinstance(seen, piecewise.Maximum), a, b)
    return None


def _tail(term: sympy.Expr, view: View) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(c, w) when `term` is c * softplus(-abs(w)), the other half of an idiom.

    -c * log_sigmoid(abs(w)) is the same term, as `negated_softplus` leaves it.
    """
    coefficient, core = term.as_coeff_Mul()
    argument = view.argument(core, "softplus")
    if argument is None:
        argument = view.argument(core, "log_sigmoid")
        coefficient = -coefficient
        argument = None if argument is None else -argument
    w = None if argument is None else view.argument(-argument, "abs")
    return None if w is None else (coefficient, w)


def _smooth(kink: _Kink, tail: tuple[sympy.Expr, sympy.Expr], view: View) -> sympy.Expr | None:
    """The smooth function kink + tail computes, or None when they are not one idiom."""
    coefficient, w = tail
    sign = 1 if kink.is_max else -1
    if coefficient != sign * kink.coefficient:
        return None
    difference = kink.a - kink.b
    if not (view.same(w, difference) or view.same(w, -difference)):
        return None
    a, b = (kink.a, kink.b) if kink.is_max else (-kink.a, -kink.b)
    return sign * kink.coefficient * logaddexp(a, b)


def logaddexp(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """logaddexp(a, b), as softplus where one argument is 0."""
    if b == 0:
        return functions.call("softplus", a)
    if a == 0:
        return functions.call("softplus", b)
    return functions.call("logaddexp", a, b)


def smooth_pairs(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """A sum with a kinked term and its softplus(-abs(.)) partner: the smooth function."""
    if not isinstance(node, sympy.Add):
        return None
    terms = list(node.args)
    kinks = [k for k in (_kink(t, view) for t in terms) if k is not None]
    tails = [(t, tail) for t in terms if (tail := _tail(t, view)) is not None]
    for kink in kinks:
        for term, tail in tails:
            smooth = _smooth(kink, tail, view)
            if smooth is not None:
                rest = list(terms)
                rest.remove(kink.term)
                rest.remove(term)
                return sympy.Add(smooth, *rest)
    return None


def negated_softplus(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """c * softplus(-u) with c < 0 -> -c * log_sigmoid(u): one spelling of logsigmoid."""
    if not isinstance(node, sympy.Mul):
        return None
    coefficient, _ = node.as_coeff_Mul()
    if not coefficient.is_negative:
        return None
    for factor in node.args:
        if is_call(factor, "softplus") and factor.args[0].could_extract_minus_sign():
            rest = list(node.args)
            rest.remove(factor)
            return -sympy.Mul(functions.call("log_sigmoid", -factor.args[0]), *rest)
    return None


def mirrored_difference(node: sympy.Basic, view: View) -> sympy.Expr | None:
    """c softplus(u) - c softplus(-u) -> c u, log_sigmoid(u) read as -softplus(-u): the
    difference cancels near u = 0, where it is u itself (d/dt of BCE with logits is
    log_sigmoid(-x) - log_sigmoid(x), and log(1 + e^u) - log(1 + e^-u) = log(e^u))."""
    if not isinstance(node, sympy.Add):
        return None
    found = [(t, m) for t in node.args if (m := _as_softplus(t, view)) is not None]
    for n, (term, (u, c)) in enumerate(found):
        for other, (other_u, other_c) in found[n + 1 :]:
            if other_c == -c and view.same(other_u, -u):
                remaining = list(node.args)
                remaining.remove(term)
                remaining.remove(other)
                return sympy.Add(c * u, *remaining)
    return None


def _as_softplus(term: sympy.Basic, view: View) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(u, c) when `term` is c * softplus(u), or -c * log_sigmoid(-u), as written or named."""
    factors = list(term.args) if isinstance(term, sympy.Mul) else [term]
    for factor in factors:
        rest = list(factors)
        rest.remove(factor)
        u = view.argument(factor, "softplus")
        if u is not None:
            return u, sympy.Mul(*rest)
        u = view.argument(factor, "log_sigmoid")
        if u is not None:
            return -u, -sympy.Mul(*rest)
    return None
