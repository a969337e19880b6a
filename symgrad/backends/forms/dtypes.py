"""The form of dtype constants, chosen once for every backend; each spells it.

`finfo_eps(x)` is a 0-d tensor of `x`'s dtype on its device holding that dtype's
machine epsilon (Note [Dtype constants] in symgrad.language.dtypes): a tensor wherever
the printers take it for one, and one that promotes nothing it meets.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import dtypes


class DtypeForms(ArithmeticForms):
    """Constants read from a tensor's dtype at call time."""

    def _print_FinfoEps(self, expr: dtypes.FinfoEps) -> str:
        """The eps of the argument's dtype, as a 0-d tensor like it."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError("finfo_eps() needs a tensor input")
        return self._spell_finfo_eps(self._print(expr.argument))

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_finfo_eps(self, like: str) -> str:
        """A 0-d tensor of `like`'s dtype and device: its dtype's machine epsilon."""
        raise NotImplementedError
