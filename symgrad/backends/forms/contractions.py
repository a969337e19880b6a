"""The form of contractions (einsum, matmul), chosen once for every backend; each spells it.

A contraction is one call of torch's contraction kernels, never a broadcast product
summed (Note [Contractions] in symgrad.language.contractions): the product of two
matrices is torch.matmul, any other subscripts torch.einsum, which plans the order of
its pairwise contractions itself (bmm underneath).
"""

from __future__ import annotations

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import contractions


class ContractionForms(ArithmeticForms):
    """einsum and matmul over tensors, in torch's contraction kernels."""

    def _print_Einsum(self, expr: contractions.Einsum) -> str:
        """matmul for the product of two matrices; einsum for any other subscripts."""
        if not all(self.is_tensor(operand) for operand in expr.operands):
            raise UnprintableError(f"{expr.name}() needs operands that depend on tensors")
        operands = [self._print(operand) for operand in expr.operands]
        if expr.subscripts == contractions.MATMUL:
            return self._spell_matmul(operands[0], operands[1])
        return self._spell_einsum(expr.subscripts, operands)

    def _spell_matmul(self, a: str, b: str) -> str:
        """The matrix product of two 2-d tensors."""
        raise NotImplementedError

    def _spell_einsum(self, subscripts: str, operands: list[str]) -> str:
        """torch.einsum with subscripts of the grammar's letters, commas and '->'."""
        raise NotImplementedError
