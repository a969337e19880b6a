"""The form of scans and sort along a dim, chosen once for every backend; each spells it.

cumsum, flip, sort values, argsort and positions (Note [Scans and sort] in
symgrad.language.scans) are torch's own kernels; the one choice here is the form of
`position`: torch.arange along the dim, expanded like its argument, as views (the
argument's dim moved last and back where the dim is not the last), never a full tensor.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import scans


class ScanForms(ArithmeticForms):
    """Scans and sort over tensors, in torch's operations."""

    # Set while printing a comparison with an index input: positions are then int64.
    integer_positions = False

    def _scanned(self, expr: scans.AlongDim) -> str:
        """The argument of a scan, which must be a tensor."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        return self._print(expr.argument)

    def _print_Cumsum(self, expr: scans.Cumsum) -> str:
        return self._spell_cumsum(self._scanned(expr), expr.dim)

    def _print_Flip(self, expr: scans.Flip) -> str:
        return self._spell_flip(self._scanned(expr), expr.dim)

    def _print_Sort(self, expr: scans.Sort) -> str:
        return self._spell_sort(self._scanned(expr), expr.dim, expr.descending)

    def _print_SortIndices(self, expr: scans.SortIndices) -> str:
        return self._spell_argsort(self._scanned(expr), expr.dim, expr.descending)

    def _print_Position(self, expr: scans.Position) -> str:
        """arange along dim in the argument's dtype (int64 beside an index), expanded like
        it: the dim moved last for the expansion and back, unless it is the last already."""
        self._scanned(expr)
        like, dim = self._operand(expr.argument), expr.dim
        positions = self._spell_arange(like, dim, integer=self.integer_positions)
        if dim == -1:
            return self._spell_expand_as(positions, like)
        moved = self._spell_movedim(like, dim, -1)
        return self._spell_movedim(self._spell_expand_as(positions, moved), -1, dim)

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_cumsum(self, argument: str, dim: int) -> str:
        """torch.cumsum(argument, dim)."""
        raise NotImplementedError

    def _spell_flip(self, argument: str, dim: int) -> str:
        """torch.flip(argument, (dim,))."""
        raise NotImplementedError

    def _spell_sort(self, argument: str, dim: int, descending: bool) -> str:
        """The values of torch.sort(argument, dim, descending)."""
        raise NotImplementedError

    def _spell_argsort(self, argument: str, dim: int, descending: bool) -> str:
        """torch.argsort(argument, dim, descending): the indices of the same sort."""
        raise NotImplementedError

    def _spell_arange(self, like: str, dim: int, integer: bool = False) -> str:
        """0, 1, ... up to the size of `like` along dim, in its dtype (int64 if `integer`)
        and on its device."""
        raise NotImplementedError

    def _spell_expand_as(self, value: str, like: str) -> str:
        """`value` expanded (a view) to the shape of `like`."""
        raise NotImplementedError

    def _spell_movedim(self, value: str, source: int, destination: int) -> str:
        """`value` with dim `source` moved to `destination` (a view)."""
        raise NotImplementedError
