"""Contractions: `einsum` and `matmul`, computed by torch's contraction kernels.

Note [Contractions]: `einsum("ij,jk->ik", a, b)` is torch.einsum's sum of products over
the letters the output drops; `matmul(a, b)` is the same node with the subscripts of a
matrix product, `"ij,jk->ik"` (a transposed operand is written in the subscripts:
`einsum("nd,kd->nk", x, codebook)` is `x @ codebook.T`). The subscripts are data from
the spec: `parse_subscripts` reads them with a strict grammar (letters, commas and one
`->`, the output explicit) and never evaluates them.

The frontend sums a letter that one operand alone has and the output drops out of that
operand first (a `sum` reduction, whose adjoint broadcasts back), so in an `Einsum` node
every letter of an operand is in the output or in another operand. The adjoint of
operand k is then the einsum of the incoming gradient with the other operands, the
output's subscripts in place of k's and k's as the output: a contraction again, never
an outer product, and linear in the gradient, so the backward differentiates again
exactly. The tangent is the sum of the einsums with one operand replaced by its tangent.
A letter repeated within one operand (a diagonal) is refused.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import sympy
from sympy.core.symbol import Str

# The spellings of a contraction in the language.
CONTRACTION_SPELLINGS = ("einsum", "matmul")
# The subscripts of `matmul(a, b)`: the product of two matrices.
MATMUL = "ij,jk->ik"


class SubscriptError(ValueError):
    """Subscripts outside the grammar; `column` is the offset of the bad character."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


def parse_subscripts(text: str, operands: int) -> tuple[tuple[str, ...], str]:
    """The operands' subscripts and the output's, read from `text` ("ij,jk->ik")."""
    if text.count("->") != 1:
        raise SubscriptError("einsum subscripts need one '->' before the output", len(text))
    arrow = text.index("->")
    for column, char in enumerate(text):
        allowed = string.ascii_letters + ("," if column < arrow else "")
        if not arrow <= column < arrow + 2 and char not in allowed:
            where = "the operands' subscripts" if column < arrow else "the output"
            message = f"einsum {where} take letters{', commas' if column < arrow else ''}"
            raise SubscriptError(f"{message} and one '->', not {char!r}", column)
    inputs, output = text[:arrow].split(","), text[arrow + 2 :]
    if len(inputs) != operands:
        message = f"einsum subscripts name {len(inputs)} operands, but {operands} are given"
        raise SubscriptError(message, 0)
    offset = 0
    for part in (*inputs, output):
        if offset == arrow + 1:
            offset += 1  # past the arrow's second character
        for n, letter in enumerate(part):
            if letter in part[:n]:
                what = "the output" if offset > arrow else "one operand (a diagonal)"
                message = f"letter {letter!r} repeats within {what}, which is not supported"
                raise SubscriptError(message, offset + n)
        offset += len(part) + 1
    seen = set("".join(inputs))
    for column, letter in enumerate(output, arrow + 2):
        if letter not in seen:
            raise SubscriptError(f"output letter {letter!r} is in no operand", column)
    return tuple(inputs), output


def format_subscripts(inputs: Sequence[str], output: str) -> str:
    return ",".join(inputs) + "->" + output


class Einsum(sympy.Function):
    """`Einsum(Str(subscripts), *operands)`: torch.einsum(subscripts, *operands), where
    every operand letter is in the output or another operand (Note [Contractions])."""

    # How formulas for people (docstrings, `symgrad show`) spell it.
    name = "einsum"

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    def _eval_is_commutative(self) -> bool:
        return True  # a tensor value, as the other nodes; Str alone is not commutative

    @property
    def subscripts(self) -> str:
        return str(self.args[0])

    @property
    def operands(self) -> tuple[sympy.Expr, ...]:
        return tuple(self.args[1:])

    @property
    def parts(self) -> tuple[tuple[str, ...], str]:
        """The operands' subscripts and the output's."""
        inputs, output = self.subscripts.split("->")
        return tuple(inputs.split(",")), output


def einsum(subscripts: str, operands: Sequence[sympy.Expr]) -> sympy.Expr:
    """Build the einsum node; one operand whose subscripts are the output is itself."""
    inputs, output = subscripts.split("->")
    if len(operands) == 1 and inputs == output:
        return operands[0]
    return Einsum(Str(subscripts), *operands)


def einsum_adjoint(node: Einsum, adjoint: sympy.Expr, k: int) -> sympy.Expr:
    """The adjoint of operand `k`: the gradient contracted with the other operands."""
    inputs, output = node.parts
    others = [i for i in range(len(inputs)) if i != k]
    subscripts = format_subscripts([output, *(inputs[i] for i in others)], inputs[k])
    return einsum(subscripts, [adjoint, *(node.operands[i] for i in others)])


def einsum_tangent(node: Einsum, tangents: Sequence[sympy.Expr]) -> sympy.Expr:
    """The tangent: one einsum per operand with a tangent, that operand replaced by it."""
    terms = []
    for k, tangent in enumerate(tangents):
        if tangent != 0:
            operands = list(node.operands)
            operands[k] = tangent
            terms.append(einsum(node.subscripts, operands))
    return sympy.Add(*terms)


def einsum_shape(node: Einsum, shapes: Sequence[tuple[int, ...] | None]) -> tuple[int, ...] | None:
    """The shape of `node` given its operands' (each letter's size); None if unknown."""
    inputs, output = node.parts
    sizes: dict[str, int] = {}
    for part, shape in zip(inputs, shapes, strict=True):
        if shape is None or len(shape) != len(part):
            return None
        sizes.update(zip(part, shape, strict=True))
    return tuple(sizes[letter] for letter in output)


def output_dims(subscripts: str) -> list[tuple[int, int]]:
    """For each output letter, an operand that has it and the dim it has it at."""
    inputs, output = subscripts.split("->")
    parts = inputs.split(",")
    found = []
    for letter in output:
        k = next(n for n, part in enumerate(parts) if letter in part)
        found.append((k, parts[k].index(letter)))
    return found
