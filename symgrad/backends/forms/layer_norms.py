"""The form of layer norm over the last dim, chosen once for every backend; each spells it.

xhat and rstd (Note [Layer norm] in symgrad.language.layer_norms) are outputs 0 and 2 of
torch's `native_layer_norm` over the last dim, no weight or bias, which computes them in
one pass where the written formula is five kernels. An eps that is a tensor (the kernel
takes a number) prints the written formula; so do the fused loops, which spell no torch
calls (they refuse a layer norm as they refuse softmax: it reads its whole row).
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import layer_norms

# The outputs of native_layer_norm: (xhat, mean, rstd).
_XHAT, _RSTD = 0, 2


class LayerNormForms(ArithmeticForms):
    """xhat and rstd of a layer norm, in torch's native_layer_norm."""

    def _print_LayerNorm(self, expr: layer_norms.LayerNorm) -> str:
        return self._print_layer_norm(expr, _XHAT)

    def _print_LayerNormRstd(self, expr: layer_norms.LayerNormRstd) -> str:
        return self._print_layer_norm(expr, _RSTD)

    def _print_layer_norm(
        self, expr: layer_norms.LayerNorm | layer_norms.LayerNormRstd, output: int
    ) -> str:
        """One output of the kernel; the written formula where eps is a tensor."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError("layer_norm() needs an argument that depends on a tensor")
        if self.is_tensor(expr.eps):
            return f"({self._print(expr.expanded())})"
        argument = self._print(expr.argument)
        return self._spell_layer_norm(argument, self._print(expr.eps), output)

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_layer_norm(self, argument: str, eps: str, output: int) -> str:
        """Output `output` of native_layer_norm over the last dim, without weight and bias."""
        raise NotImplementedError
