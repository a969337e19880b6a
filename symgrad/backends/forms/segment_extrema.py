"""The form of segment maxima by an index, chosen once for every backend; each spells it.

A segment maximum is zeros whose `dim` has `size` elements, in the source's dtype and on
its device, reduced into by torch's `scatter_reduce(..., "amax", include_self=False)`
with the index viewed along `dim` and expanded to the source's shape (index_reduce takes
the 1-d index as it is, but warns that it is beta), so that an empty segment keeps its
zero (Note [Segment maxima] in
symgrad.language.segment_extrema).
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.segments import SegmentForms
from symgrad.language import segment_extrema


class SegmentExtremaForms(SegmentForms):
    """Segment maxima in torch's scatter_reduce; the zeros are a segment sum's."""

    def _print_SegmentAmax(self, expr: segment_extrema.SegmentAmax) -> str:
        """scatter_reduce of the source into zeros of the segmented shape, zeros excluded."""
        if not self.is_tensor(expr.source):
            raise UnprintableError("segment_amax() needs a value that depends on a tensor")
        like = self._print(expr.args[4])
        zeros = self._spell_segment_zeros(like, expr.dim, self._print(expr.size))
        source, index = self._print(expr.source), self._print(expr.index)
        return self._spell_segment_reduce(zeros, expr.dim, index, source, expr.reduction)

    # sympy dispatches a subclass of a language node by its own name only.
    _print_SegmentAmaxAgain = _print_SegmentAmax

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_segment_reduce(
        self, zeros: str, dim: int, index: str, source: str, reduction: str
    ) -> str:
        """`zeros` reduced into by the slices of `source` at `index` along `dim`, the
        zeros themselves left out of the reduction (out of place)."""
        raise NotImplementedError
