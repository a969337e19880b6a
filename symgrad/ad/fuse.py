"""Recognise torch's fused activations in a formula written out (`x * sigmoid(x)` -> silu).

Users write the activations they know as formulas. torch has one kernel for each of
them forward (`silu`, `mish`, `gelu`) and one for its backward, where the formula
costs a kernel per operation both ways. Each rule is an identity, so the rewrite
changes nothing but rounding; the activation's derivative is torch's own
(symgrad.language.activations). Rules match a product within one expression:

| written (any extra factors f)                        | emitted            |
| ---------------------------------------------------- | ------------------ |
| f * u * sigmoid(u)                                   | f * silu(u)        |
| f * u * tanh(softplus(u))                            | f * mish(u)        |
| f * 0.5 * u * (1 + erf(u / sqrt(2)))                 | f * gelu(u)        |
| f * 0.5 * u * (1 + tanh(sqrt(2/pi) (u + 0.044715 u**3))) | f * gelu_tanh(u) |

Constants match to 12 significant digits, so `0.7978845608028654` is sqrt(2/pi).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import sympy

from symgrad.ad.rewrite import bottom_up
from symgrad.language import activations, functions

# A match: the activation's argument u and the factors left over besides u (and 1/2).
Match = tuple[sympy.Expr, list[sympy.Expr]]
_RELATIVE_TOLERANCE = 1e-12
_SQRT_TWO_OVER_PI = float(sympy.sqrt(2 / sympy.pi))
_KAPPA = 0.044715
_SQRT_TWO = float(sympy.sqrt(2))


def fuse_activations(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every product of the table above replaced, bottom-up."""
    return bottom_up(expr, _fuse_if_product)


def _fuse_if_product(node: sympy.Basic) -> sympy.Basic:
    return _fuse_product(node) if isinstance(node, sympy.Mul) else node


def _fuse_product(node: sympy.Mul) -> sympy.Expr:
    """The product with one recognised activation fused, or unchanged."""
    factors = list(node.args)
    for index, factor in enumerate(factors):
        rest = factors[:index] + factors[index + 1 :]
        for rule, activation in _RULES:
            match = rule(factor, rest)
            if match is not None:
                argument, leftover = match
                return sympy.Mul(*leftover, activation(argument))
    return node


def _is_call(node: sympy.Basic, name: str) -> bool:
    return isinstance(node, functions.ElementwiseFunction) and type(node).__name__ == name


def _without(factors: list[sympy.Expr], factor: sympy.Expr) -> list[sympy.Expr] | None:
    """`factors` less one occurrence of `factor` (a power u**k gives up one u), or None.

    A product leaves factor by factor: x * y * sigmoid(x * y) is silu(x * y).
    """
    if isinstance(factor, sympy.Mul) and factor not in factors:
        remaining: list[sympy.Expr] | None = factors
        for part in factor.args:
            remaining = None if remaining is None else _without_one(remaining, part)
        return remaining
    return _without_one(factors, factor)


def _without_one(factors: list[sympy.Expr], factor: sympy.Expr) -> list[sympy.Expr] | None:
    """`factors` less one occurrence of the non-product `factor`, or None."""
    for index, candidate in enumerate(factors):
        rest = factors[:index] + factors[index + 1 :]
        if candidate == factor:
            return rest
        base, exponent = candidate.as_base_exp()
        if base == factor and exponent.is_Integer and exponent > 1:
            return [*rest, base ** (exponent - 1)]
    return None


def _without_half(factors: list[sympy.Expr]) -> list[sympy.Expr] | None:
    """`factors` with their number coefficient halved back, or None if it is not 1/2 * k."""
    coefficient = sympy.Mul(*(f for f in factors if f.is_number))
    others = [f for f in factors if not f.is_number]
    doubled = 2 * coefficient
    if doubled.is_number and doubled != 0:
        return others if _close(doubled, 1) else [doubled, *others]
    return None


def _close(value: sympy.Expr, target: float) -> bool:
    number = complex(value)
    return number.imag == 0 and abs(number.real - target) <= _RELATIVE_TOLERANCE * abs(target)


def _one_plus(node: sympy.Expr, name: str) -> sympy.Expr | None:
    """v when `node` is 1 + name(v)."""
    if isinstance(node, sympy.Add) and len(node.args) == 2 and sympy.Integer(1) in node.args:
        (other,) = (a for a in node.args if a != 1)
        if _is_call(other, name):
            inner: sympy.Expr = other.args[0]
            return inner
    return None


def _silu(factor: sympy.Expr, rest: list[sympy.Expr]) -> Match | None:
    if not _is_call(factor, "sigmoid"):
        return None
    argument = factor.args[0]
    leftover = _without(rest, argument)
    return None if leftover is None else (argument, leftover)


def _mish(factor: sympy.Expr, rest: list[sympy.Expr]) -> Match | None:
    if not (_is_call(factor, "tanh") and _is_call(factor.args[0], "softplus")):
        return None
    argument = factor.args[0].args[0]
    leftover = _without(rest, argument)
    return None if leftover is None else (argument, leftover)


def _gelu(factor: sympy.Expr, rest: list[sympy.Expr]) -> Match | None:
    inner = _one_plus(factor, "erf")
    if inner is None:
        return None
    coefficient, argument = _split_coefficient(inner)
    if not _close(coefficient, 1 / _SQRT_TWO):
        return None
    return _half_times(argument, rest)


def _split_coefficient(product: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """(number coefficient, the rest) of a product; rsqrt(2) counts as a number."""
    factors = sympy.Mul.make_args(product)
    numbers = [f for f in factors if f.free_symbols == set()]
    others = [f for f in factors if f.free_symbols]
    coefficient = sympy.Mul(*numbers).replace(
        lambda n: _is_call(n, "rsqrt"), lambda n: 1 / sympy.sqrt(n.args[0])
    )
    return coefficient, sympy.Mul(*others)


def _gelu_tanh(factor: sympy.Expr, rest: list[sympy.Expr]) -> Match | None:
    inner = _one_plus(factor, "tanh")
    if inner is None:
        return None
    for candidate in _candidates(rest):
        if _is_gelu_tanh_inner(inner, candidate):
            return _half_times(candidate, rest)
    return None


def _half_times(argument: sympy.Expr, rest: list[sympy.Expr]) -> Match | None:
    """(argument, leftover) when `rest` is 1/2 * argument * leftover."""
    leftover = _without(rest, argument)
    if leftover is None:
        return None
    halved = _without_half(leftover)
    return None if halved is None else (argument, halved)


def _candidates(factors: list[sympy.Expr]) -> Iterator[sympy.Expr]:
    """The non-number factors, and the bases of their integer powers."""
    for factor in factors:
        if not factor.is_number:
            base, exponent = factor.as_base_exp()
            yield base if exponent.is_Integer and exponent > 0 else factor


def _is_gelu_tanh_inner(inner: sympy.Expr, u: sympy.Expr) -> bool:
    """Whether `inner` is sqrt(2/pi) * (u + 0.044715 * u**3), constants to 12 digits."""
    stand_in = sympy.Dummy("u", real=True)
    polynomial = sympy.expand(inner.xreplace({u: stand_in}))
    if not polynomial.is_polynomial(stand_in) or polynomial.free_symbols != {stand_in}:
        return False
    coefficients = sympy.Poly(polynomial, stand_in).all_coeffs()
    if len(coefficients) != 4 or not (coefficients[1].is_zero and coefficients[3].is_zero):
        return False
    cubic, linear = coefficients[0], coefficients[2]
    return _close(linear, _SQRT_TWO_OVER_PI) and _close(cubic, _SQRT_TWO_OVER_PI * _KAPPA)


_RULES: tuple[tuple[Callable[..., Match | None], Callable[..., sympy.Expr]], ...] = (
    (_silu, activations.Silu),
    (_mish, activations.Mish),
    (_gelu, activations.Gelu),
    (_gelu_tanh, activations.GeluTanh),
)
