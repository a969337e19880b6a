"""The form of layer norm over the last dim, chosen once for every backend; each spells it.

xhat and rstd (Note [Layer norm] in symgrad.language.layer_norms) are outputs 0 and 2 of
torch's `native_layer_norm` over the last dim, no weight or bias, which computes them in
one pass where the written formula is five kernels; where the forward computes both (the
rstd a residual), one call sets both (`forward_statements`). An eps that is a tensor (the
kernel takes a number) prints the written formula; so do the fused loops, which spell no
torch calls (they refuse a layer norm as they refuse softmax: it reads its whole row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from sympy.printing.precedence import PRECEDENCE

from symgrad.ad.ir import Assignment
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
        return self._spell_layer_norm(self._owner(expr.argument), self._print(expr.eps), output)

    def forward_statements(
        self, forward: Sequence[Assignment], statement: Callable[[Assignment], str]
    ) -> tuple[str, ...]:
        """The forward's statements, `statement` of each, but one kernel call for each
        layer norm's rstd and its xhat, where the rstd is computed (the xhat reads it)."""
        pairs = self._layer_norm_pairs(forward)
        paired = {xhat.target for xhat in pairs.values()}
        lines = []
        for assignment in forward:
            xhat = pairs.get(assignment.target)
            if xhat is not None:
                names = (self._print(xhat.target), self._print(assignment.target))
                x, eps = self._owner(xhat.expr.argument), self._print(xhat.expr.eps)
                lines.append(self._spell_layer_norm_pair(*names, x, eps))
            elif assignment.target not in paired:
                lines.append(statement(assignment))
        return tuple(lines)

    def _layer_norm_pairs(self, forward: Sequence[Assignment]) -> dict[sympy.Basic, Assignment]:
        """{rstd's target: the xhat statement} of each kernel call that computes both."""
        rstds = {
            a.target: a.expr
            for a in forward
            if isinstance(a.expr, layer_norms.LayerNormRstd) and not self.is_tensor(a.expr.eps)
        }
        pairs: dict[sympy.Basic, Assignment] = {}
        for a in forward:
            if isinstance(a.expr, layer_norms.LayerNorm) and a.expr.rstd in rstds:
                rstd = rstds[a.expr.rstd]
                if (rstd.argument, rstd.eps) == (a.expr.argument, a.expr.eps):
                    pairs.setdefault(a.expr.rstd, a)
        return pairs

    def _owner(self, argument: sympy.Basic) -> str:
        """`argument` printed so that its shape can be read from it: `x`, `f(x)`, `(a + b)`
        (the spellings write it twice, as the tensor and as the owner of its shape)."""
        owner: str = self.parenthesize(argument, PRECEDENCE["Pow"])
        return owner

    # --- The spellings a backend gives ----------------------------------------------------

    def _spell_layer_norm(self, argument: str, eps: str, output: int) -> str:
        """Output `output` of native_layer_norm over the last dim, without weight and bias."""
        raise NotImplementedError

    def _spell_layer_norm_pair(self, xhat: str, rstd: str, argument: str, eps: str) -> str:
        """A statement that sets `xhat` and `rstd` from one native_layer_norm call."""
        raise NotImplementedError
