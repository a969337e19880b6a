"""The form of the elementwise losses huber and smooth_l1, chosen once for every backend.

Note [Losses of a difference]: torch's kernels take the loss of `a` against `b`, and a
spec's argument is the difference d = a - b, which is how the losses are always written.
Where d is a difference of two tensors the kernel gets them (no subtraction of its own),
else d against a zero broadcast to its shape (no fill; cheaper than the piecewise
formula's five passes). A `where` name d is such a value: the forward computes it and the
backward reads it saved (symgrad.ad.loss_idioms). On numbers, and in the fused loops
that spell no torch calls, the loss is its piecewise definition, as it is where the
parameter is a tensor.
"""

from __future__ import annotations

import sympy

from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.language import losses


class LossForms(ArithmeticForms):
    """huber and smooth_l1 as torch's loss kernels, reduction none."""

    def _print_Huber(self, expr: losses.Huber) -> str:
        return self._print_pointwise_loss(expr)

    def _print_SmoothL1(self, expr: losses.SmoothL1) -> str:
        return self._print_pointwise_loss(expr)

    def _print_pointwise_loss(self, expr: losses.PointwiseLoss) -> str:
        """The kernel on the difference's two tensors (Note [Losses of a difference])."""
        d, parameter = expr.args
        if not self.is_tensor(d) or self.is_tensor(parameter):
            # torch's kernels take the parameter as a number only.
            return f"({self._print(expr.expanded())})"
        pair = self._difference(d)
        a, b = (self._print(d), None) if pair is None else (self._print(t) for t in pair)
        kernel = self._spell_pointwise_loss(expr.name, a, b, self._print(parameter))
        domain = expr.domain()
        if domain == sympy.true:
            return kernel
        definition = f"({self._print(expr.expanded())})"
        return self._spell_number_choice(self._print(domain), kernel, definition)

    def _print_HuberSlope(self, expr: losses.HuberSlope) -> str:
        return self._print_loss_slope(expr)

    def _print_SmoothL1Slope(self, expr: losses.SmoothL1Slope) -> str:
        return self._print_loss_slope(expr)

    def _print_loss_slope(self, expr: losses.LossSlope) -> str:
        """Decided by the number parameter in the host language, once per call."""
        d, parameter = expr.args
        if not self.is_tensor(d) or self.is_tensor(parameter):
            return f"({self._print(expr.expanded())})"
        when, choice, otherwise = expr.expanded().args
        return self._spell_number_choice(
            self._print(when), self._print(choice), self._print(otherwise)
        )

    def _difference(self, d: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
        """(a, b) when `d` is a - b of two tensors, else None."""
        if not (isinstance(d, sympy.Add) and len(d.args) == 2):
            return None
        first, second = d.args
        a, b = (first, -second) if second.could_extract_minus_sign() else (second, -first)
        if a.could_extract_minus_sign() or not (self.is_tensor(a) and self.is_tensor(b)):
            return None
        return a, b

    def _spell_pointwise_loss(self, name: str, a: str, b: str | None, parameter: str) -> str:
        """torch's kernel of the loss `name` of `a` against `b` (zeros where None)."""
        raise NotImplementedError

    def _spell_number_choice(self, condition: str, a: str, b: str) -> str:
        """`a` where the number condition holds, else `b`, decided once (not per element)."""
        raise NotImplementedError
