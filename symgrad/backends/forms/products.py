"""The form of cumulative products, chosen once for every backend; each spells it.

`cumprod(x, dim)` is torch's own kernel; its derivatives are written of cumsums, flips,
wheres and cumprods again (Note [Cumprod's exact derivatives] in symgrad.language.scans),
so the one operation a backend spells here is the cumprod itself.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import scans


class ProductForms(ArithmeticForms):
    """Cumulative products over tensors, in torch's operation."""

    def _print_Cumprod(self, expr: scans.Cumprod) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError("cumprod() needs an argument that depends on a tensor")
        return self._spell_cumprod(self._print(expr.argument), expr.dim)

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_cumprod(self, argument: str, dim: int) -> str:
        """torch.cumprod(argument, dim)."""
        raise NotImplementedError
