"""Views of a value in another shape: reshape (view), unsqueeze, chunk pieces and cat.

Note [Views]: `reshape(x, [1, -1, 1, 1])` (or `view`) and `unsqueeze(x, dim)` read a
value in another shape with torch's meaning, so a bias of shape [C] can meet an NCHW
tensor along dim 1 and `unsqueeze(a, 1) - unsqueeze(b, 0)` makes pairwise differences.
`chunk(x, n, dim)[i]` is piece i of torch.chunk and `cat([a, b], dim)` concatenates.

Each node has a shape of its own (`Shapes` in symgrad.language.reductions reads it as
a view of its argument's). Their adjoints are views back, exact in shape:
- reshape and unsqueeze: the adjoint, summed to the node's shape, reshaped to the
  argument's (`ReshapeTo`);
- a chunk piece: the concatenation of every piece's adjoint (`ChunkCat`), zeros of its
  shape (`PieceZeros`) for a piece that gets none; the pieces of one chunk that each
  pass an adjoint merge into one concatenation (`merge_chunk_cats`), not a sum of
  padded tensors;
- cat: the slice of the adjoint each piece was (`CatPiece`).
All of them are linear in the adjoint, so the backward differentiates again exactly;
the tangent of a view is the same view of the tangent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import sympy


class _Node(sympy.Function):
    """A node kept as written: never evaluated, real-valued."""

    # How the spec language and formulas for people spell it.
    name: ClassVar[str]

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def argument(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result


class View(_Node):
    """A view of `argument` in another shape; its `method` and `parameters` are torch's."""

    method: ClassVar[str]

    @property
    def parameters(self) -> tuple[int, ...]:
        return tuple(int(a) for a in self.args[1:])


class Reshape(View):
    """`Reshape(argument, *sizes)`: argument.reshape(sizes), one size may be -1."""

    name = "reshape"
    method = "reshape"


class Unsqueezed(View):
    """`Unsqueezed(argument, dim)`: argument.unsqueeze(dim)."""

    name = "unsqueeze"
    method = "unsqueeze"


class Chunk(View):
    """`Chunk(argument, chunks, dim, piece)`: argument.chunk(chunks, dim)[piece]."""

    name = "chunk"
    method = "chunk"


class Cat(_Node):
    """`Cat(dim, *pieces)`: torch.cat(pieces, dim)."""

    name = "cat"

    @property
    def dim(self) -> int:
        return int(self.args[0])

    @property
    def pieces(self) -> tuple[sympy.Expr, ...]:
        return tuple(self.args[1:])


class ChunkCat(Cat):
    """The adjoint of a chunk's pieces: `Cat(dim, *pieces)` with the argument's shape."""


class ReshapeTo(_Node):
    """`ReshapeTo(value, ShapeOf(argument))`: the adjoint of a reshape or unsqueeze."""

    name = "reshape"


class PieceZeros(_Node):
    """`PieceZeros(like, ShapeOf(piece))`: zeros of a piece's shape in like's dtype."""

    name = "zeros"


class CatPiece(_Node):
    """`CatPiece(value, dim, piece, *ShapeOf(pieces))`: piece `piece` of `value` split
    along `dim` into the sizes the pieces have there (the adjoint of a cat)."""

    name = "split"

    @property
    def dim(self) -> int:
        return int(self.args[1])

    @property
    def piece(self) -> int:
        return int(self.args[2])

    @property
    def sizes(self) -> tuple[sympy.Basic, ...]:
        return tuple(self.args[3:])


# The spellings of the language: reshape's alias view is torch's too.
VIEW_SPELLINGS = ("reshape", "view", "unsqueeze", "chunk", "cat")

# The nodes whose shape is their own, not their arguments' broadcast.
SHAPED = (View, Cat)


def reshape(argument: sympy.Expr, sizes: Sequence[int]) -> Reshape:
    """Build `reshape(argument, sizes)`."""
    return Reshape(argument, *(sympy.Integer(s) for s in sizes))


def unsqueeze(argument: sympy.Expr, dim: int) -> Unsqueezed:
    """Build `unsqueeze(argument, dim)`."""
    return Unsqueezed(argument, sympy.Integer(dim))


def chunk(argument: sympy.Expr, chunks: int, dim: int, piece: int) -> Chunk:
    """Build `chunk(argument, chunks, dim)[piece]`."""
    return Chunk(argument, *(sympy.Integer(n) for n in (chunks, dim, piece)))


def cat(pieces: Sequence[sympy.Expr], dim: int) -> Cat:
    """Build `cat(pieces, dim)`."""
    return Cat(sympy.Integer(dim), *pieces)


def view_shape(node: View, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of `node` given its argument's, as torch computes it (ValueError if none)."""
    if isinstance(node, Reshape):
        sizes = node.parameters
        known = 1
        for size in sizes:
            known *= size if size != -1 else 1
        total = 1
        for size in shape:
            total *= size
        if -1 in sizes:
            if known == 0 or total % known:
                raise ValueError(f"cannot hold {total} elements in shape {list(sizes)}")
            return tuple(total // known if s == -1 else s for s in sizes)
        if known != total:
            raise ValueError(f"{total} elements cannot take shape {list(sizes)}")
        return sizes
    rank = len(shape) + (1 if isinstance(node, Unsqueezed) else 0)
    dim = node.parameters[0] if isinstance(node, Unsqueezed) else node.parameters[1]
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"dim {dim} is out of range for {rank} dimensions")
    dim %= max(rank, 1)
    if isinstance(node, Unsqueezed):
        return (*shape[:dim], 1, *shape[dim:])
    chunks = node.parameters[0]
    if not shape or shape[dim] % chunks:
        held = shape[dim] if shape else "a 0-d value"
        raise ValueError(f"{chunks} chunks do not divide size {held} of dim {dim}")
    return (*shape[:dim], shape[dim] // chunks, *shape[dim + 1 :])


def cat_shape(dim: int, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape of torch.cat of `shapes` along `dim` (ValueError where they do not fit)."""
    rank = len(shapes[0])
    if not rank or any(len(s) != rank for s in shapes):
        raise ValueError(f"pieces of shapes {[list(s) for s in shapes]} have different ranks")
    if not -rank <= dim < rank:
        raise ValueError(f"dim {dim} is out of range for {rank} dimensions")
    dim %= rank
    for shape in shapes:
        if any(a != b for n, (a, b) in enumerate(zip(shape, shapes[0], strict=True)) if n != dim):
            raise ValueError(f"pieces of shapes {[list(s) for s in shapes]} differ off dim {dim}")
    return (*shapes[0][:dim], sum(s[dim] for s in shapes), *shapes[0][dim + 1 :])


def view_adjoint(node: View, adjoint: sympy.Expr, shape_of: Any) -> sympy.Expr:
    """The adjoint `node` passes to its argument, given its own (exactly in its shape).

    `shape_of` builds the ShapeOf fact of an expression.
    """
    if not isinstance(node, Chunk):
        return ReshapeTo(adjoint, shape_of(node.argument))
    chunks, dim, piece = node.parameters

    def zeros(n: int) -> PieceZeros:
        return PieceZeros(adjoint, shape_of(chunk(node.argument, chunks, dim, n)))

    pieces = [adjoint if n == piece else zeros(n) for n in range(chunks)]
    return ChunkCat(sympy.Integer(dim), *pieces)


def cat_adjoints(node: Cat, adjoint: sympy.Expr, shape_of: Any) -> list[sympy.Expr]:
    """The adjoint each piece of `node` gets, given the cat's own (exactly in its shape)."""
    sizes = [shape_of(piece) for piece in node.pieces]
    return [CatPiece(adjoint, node.args[0], sympy.Integer(n), *sizes) for n in range(len(sizes))]


def view_tangent(node: View, tangent: sympy.Expr) -> sympy.Expr:
    """The tangent of a view: the same view of its argument's tangent."""
    if tangent == 0:
        return sympy.Integer(0)
    return node.func(tangent, *node.args[1:])


def cat_tangent(node: Cat, tangents: Sequence[sympy.Expr], shape_of: Any) -> sympy.Expr:
    """The tangent of a cat: the cat of its pieces' tangents, zeros for a piece without."""
    given = [t for t in tangents if t != 0]
    if not given:
        return sympy.Integer(0)
    pieces = [
        t if t != 0 else PieceZeros(given[0], shape_of(piece))
        for t, piece in zip(tangents, node.pieces, strict=True)
    ]
    return Cat(node.args[0], *pieces)


def merge_chunk_cats(exprs: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """`exprs` with the adjoints of pieces of one chunk merged into one concatenation.

    Two `ChunkCat`s of the same dim and count come from pieces of the same chunk of the
    same argument (they are terms of that argument's adjoint): piece by piece, zeros
    give way to the other's adjoint, and two adjoints add.
    """
    merged: dict[tuple[int, int], ChunkCat] = {}
    rest: list[sympy.Expr] = []
    for expr in exprs:
        if not isinstance(expr, ChunkCat):
            rest.append(expr)
            continue
        key = (expr.dim, len(expr.pieces))
        if key not in merged:
            merged[key] = expr
            continue
        pieces = [_add_piece(a, b) for a, b in zip(merged[key].pieces, expr.pieces, strict=True)]
        merged[key] = ChunkCat(expr.args[0], *pieces)
    return [*merged.values(), *rest]


def _add_piece(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """The sum of two pieces' adjoints, where zeros add nothing."""
    if isinstance(a, PieceZeros):
        return b
    if isinstance(b, PieceZeros):
        return a
    return a + b
