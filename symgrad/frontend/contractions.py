"""Contraction calls, `einsum` and `matmul`: read, normalised, then checked against shapes.

The subscripts string is read by the strict grammar of symgrad.language.contractions
(Note [Contractions]), each error pointing at its character. A letter that one operand
alone has and the output drops is summed out of that operand here, so the language's
`Einsum` node never needs to expand a gradient back. Once every expression is built,
each contraction is checked where the test shapes tell: an operand's rank is its number
of letters and each letter has one size.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping
from typing import Protocol

import sympy

from symgrad.errors import Location, SpecError
from symgrad.frontend.indices import named_expressions, test_shape
from symgrad.frontend.model import Spec
from symgrad.language import contractions, reductions


class Walker(Protocol):
    """What a contraction call needs of the expression walker (symgrad.frontend.calls)."""

    def error(self, node: ast.AST | None, message: str) -> SpecError: ...

    def value(self, node: ast.AST, depth: int) -> sympy.Expr: ...


def contraction_call(walker: Walker, node: ast.Call, spelling: str, depth: int) -> sympy.Expr:
    """einsum("ij,jk->ik", a, b) or matmul(a, b), as torch spells them."""
    if node.keywords:
        raise walker.error(node.keywords[0], f"{spelling}() takes no keyword arguments")
    if spelling == "matmul":
        if len(node.args) != 2:
            message = f"matmul() takes 2 arguments, got {len(node.args)}"
            raise walker.error(node.func, message)
        subscripts, operand_nodes = contractions.MATMUL, node.args
    else:
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            message = 'einsum() takes its subscripts first, as a string: einsum("ij,jk->ik", a, b)'
            raise walker.error(first or node.func, message)
        if len(node.args) < 2:
            raise walker.error(node.func, "einsum() needs at least one operand")
        subscripts, operand_nodes = first.value, node.args[1:]
        _check_subscripts(walker, first, subscripts, len(operand_nodes))
    operands = [walker.value(arg, depth) for arg in operand_nodes]
    return build_einsum(subscripts, operands)


def _check_subscripts(walker: Walker, node: ast.Constant, text: str, count: int) -> None:
    """Refuse subscripts outside the grammar, pointing at the character at fault."""
    try:
        contractions.parse_subscripts(text, count)
    except contractions.SubscriptError as error:
        at = ast.Constant(value=node.value)
        ast.copy_location(at, node)
        at.col_offset += 1 + error.column  # past the opening quote
        raise walker.error(at, str(error)) from None


def build_einsum(subscripts: str, operands: list[sympy.Expr]) -> sympy.Expr:
    """The einsum node, each letter that one operand alone has and the output drops
    summed out of that operand first (Note [Contractions])."""
    inputs, output = contractions.parse_subscripts(subscripts, len(operands))
    counts = Counter("".join(inputs) + output)
    kept_parts = []
    for k, part in enumerate(inputs):
        alone = tuple(n for n, letter in enumerate(part) if counts[letter] == 1)
        if alone:
            operands[k] = reductions.reduce("sum", operands[k], alone, keepdim=False)
        kept_parts.append("".join(letter for letter in part if counts[letter] > 1))
    return contractions.einsum(contractions.format_subscripts(kept_parts, output), operands)


def check_contractions(spec: Spec) -> None:
    """Refuse a contraction whose operands do not fit its subscripts in the test shapes."""
    values = {i.symbol: i.expr for i in spec.intermediates}
    for item, section in named_expressions(spec):
        for node in sorted(item.expr.atoms(contractions.Einsum), key=sympy.default_sort_key):
            _check_operands(node, spec, values, item.location, f"{section}.{item.name}")


def _check_operands(
    node: contractions.Einsum,
    spec: Spec,
    values: Mapping[sympy.Basic, sympy.Basic],
    location: Location,
    path: str,
) -> None:
    """Each operand a tensor of one dim per letter; each letter one size throughout."""
    inputs, _ = node.parts
    sizes: dict[str, int] = {}
    for n, (part, operand) in enumerate(zip(inputs, node.operands, strict=True), 1):
        shape = test_shape(operand, spec, values)
        if shape is None:
            message = f"{node.name}() operand {n} must depend on a tensor"
            raise SpecError(location, message, path)
        if len(shape) != len(part):
            message = (
                f"{node.name}() operand {n} has {len(shape)} dimensions (shape {list(shape)}),"
                f" but its subscripts {part!r} name {len(part)}"
            )
            raise SpecError(location, message, path)
        for letter, size in zip(part, shape, strict=True):
            if sizes.setdefault(letter, size) != size:
                message = (
                    f"{node.name}() letter {letter!r} has size {sizes[letter]} in one operand"
                    f" and {size} in operand {n}; contractions do not broadcast"
                )
                raise SpecError(location, message, path)
