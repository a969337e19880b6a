"""The form of segment sums by an index, chosen once for every backend; each spells it.

A segment sum is zeros whose `dim` has `size` elements, in the source's dtype and on its
device, into which torch's `index_add` adds the source's slices (Note [Segment sums] in
symgrad.language.segments); its adjoint is torch's `index_select`, whose own adjoint is
index_add into zeros of the selected value's shape (Note [Index selects]). The zeros read the
shape of the node's `like` argument, the source itself, named by CSE where it is an
expression.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import segments


class SegmentForms(ArithmeticForms):
    """Segment sums and the index_select of their adjoints, in torch's index kernels."""

    def _print_SegmentSum(self, expr: segments.SegmentSum) -> str:
        """index_add of the source into zeros of the segmented shape."""
        if not self.is_tensor(expr.source):
            raise UnprintableError("segment_sum() needs a value that depends on a tensor")
        like = self._print(expr.args[4])
        zeros = self._spell_segment_zeros(like, expr.dim, self._print(expr.size))
        source, index = self._print(expr.source), self._print(expr.index)
        return self._spell_index_add(zeros, expr.dim, index, source)

    def _print_IndexSelect(self, expr: segments.IndexSelect) -> str:
        """torch.index_select: the slices of the value at the index's positions."""
        value, index = self._print(expr.argument), self._print(expr.index)
        return self._spell_index_select(value, expr.dim, index)

    def _print_IndexAdd(self, expr: segments.IndexAdd) -> str:
        """An index_select's adjoint: the source added at the index into zeros of the
        selected value's shape, by torch's index_add (Note [Index selects])."""
        source, shape, index = (self._print(a) for a in (expr.source, expr.shape, expr.index))
        return self._spell_index_add(self._spell_zeros(source, shape), expr.dim, index, source)

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_segment_zeros(self, like: str, dim: int, size: str) -> str:
        """Zeros shaped as `like` but with `size` elements along `dim`, of its dtype."""
        raise NotImplementedError

    def _spell_index_add(self, zeros: str, dim: int, index: str, source: str) -> str:
        """`zeros` with the slices of `source` added at `index` along `dim` (out of place)."""
        raise NotImplementedError

    def _spell_index_select(self, value: str, dim: int, index: str) -> str:
        raise NotImplementedError
