"""The form of argmax and argmin along a dim, chosen once for every backend; each spells it.

torch's own kernels (Note [Arg extrema] in symgrad.language.arg_extrema): int64 positions,
the first among ties. The max and min values along a dim are gathers at these positions,
printed by the gather's form.
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import arg_extrema


class ArgExtremumForms(ArithmeticForms):
    """argmax and argmin over tensors, in torch's operations."""

    def _print_ArgExtremum(self, expr: arg_extrema.ArgExtremum) -> str:
        """torch.argmax or torch.argmin along the node's one dim."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        argument = self._print(expr.argument)
        return self._spell_arg_extremum(expr.name, argument, expr.dim, expr.keepdim)

    # sympy dispatches on a Function's own class name, never an intermediate base's.
    _print_Argmax = _print_Argmin = _print_ArgExtremum

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_arg_extremum(self, name: str, argument: str, dim: int, keepdim: bool) -> str:
        """torch.`name`(argument, dim, keepdim): `name` is argmax or argmin."""
        raise NotImplementedError
