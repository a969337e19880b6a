"""The form of views, chunks and cats, chosen once for every backend; each spells it.

A view is torch's own view method on its argument (`reshape`, `unsqueeze`, a piece of
`chunk`), a cat is `cat`; their adjoints (Note [Views] in symgrad.language.views) are a
`reshape` to the argument's shape, a `cat` of the pieces' adjoints with `new_zeros` for
a piece without one, and a piece of a `split` by the sizes the cat's pieces have.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import views


class ViewForms(ArithmeticForms):
    """Views, chunk pieces, cats and their adjoints, in torch's operations."""

    def _print_View(self, expr: views.View) -> str:
        """The argument's own view method: reshape, unsqueeze or a chunk's piece."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        operand = self._operand(expr.argument)
        if isinstance(expr, views.Reshape):
            return self._spell_reshape(operand, list(map(str, expr.parameters)))
        if isinstance(expr, views.Unsqueezed):
            return self._spell_unsqueeze(operand, expr.parameters[0])
        chunks, dim, piece = expr.parameters
        return self._spell_chunk(operand, chunks, dim, piece)

    def _print_Cat(self, expr: views.Cat) -> str:
        """torch.cat of the pieces along dim (a chunk's adjoint is one too)."""
        return self._spell_cat([self._print(p) for p in expr.pieces], expr.dim)

    # sympy dispatches a Function on its own class name only: each view by name.
    _print_Reshape = _print_Unsqueezed = _print_Chunk = _print_View
    _print_ChunkCat = _print_Cat

    def _print_ReshapeTo(self, expr: views.ReshapeTo) -> str:
        """A view's adjoint: reshaped to its argument's shape (a fact of the input shapes)."""
        return self._spell_reshape_to(self._operand(expr.args[0]), self._print(expr.args[1]))

    def _print_PieceZeros(self, expr: views.PieceZeros) -> str:
        """Zeros of a piece's shape, in the dtype and device of another piece."""
        like, shape = (self._print(a) for a in expr.args)
        return self._spell_zeros(like, shape)

    def _print_CatPiece(self, expr: views.CatPiece) -> str:
        """A cat's adjoint for one piece: the adjoint split by the pieces' sizes along dim."""
        sizes = [self._print(s) for s in expr.sizes]
        return self._spell_split_piece(self._operand(expr.args[0]), sizes, expr.dim, expr.piece)

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_reshape(self, operand: str, sizes: list[str]) -> str:
        """`operand` reshaped to the sizes, one of them perhaps -1."""
        raise NotImplementedError

    def _spell_reshape_to(self, operand: str, shape: str) -> str:
        """`operand` reshaped to a shape value (a fact of the input shapes)."""
        raise NotImplementedError

    def _spell_unsqueeze(self, operand: str, dim: int) -> str:
        """`operand` with a size-1 dimension inserted at dim."""
        raise NotImplementedError

    def _spell_chunk(self, operand: str, chunks: int, dim: int, piece: int) -> str:
        """Piece `piece` of `operand` cut into `chunks` along dim."""
        raise NotImplementedError

    def _spell_cat(self, texts: list[str], dim: int) -> str:
        """The tensors concatenated along dim."""
        raise NotImplementedError

    def _spell_split_piece(self, operand: str, sizes: list[str], dim: int, piece: int) -> str:
        """Piece `piece` of `operand` split along dim by the dim's size in each shape."""
        raise NotImplementedError
