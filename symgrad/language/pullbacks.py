"""Pullbacks: `grad * f'(x)` as one node, for the functions torch has a backward kernel for.

Eager autograd runs `torch.ops.aten.silu_backward(grad, x)` for silu where the formula
`grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))` is six kernels. The reverse sweep
(symgrad.ad.reverse) builds a pullback wherever such a function meets a gradient of its
own shape; a backend prints it as the kernel, or as `expanded()` (the product written
out) where it has none. The value is the same either way, up to rounding.

Arguments are (grad, x), except where the derivative is written with the function's own
value (Note [Derivatives in terms of the result] in symgrad.language.functions): tanh and
sigmoid pull back through their value, (grad, tanh(u)), as torch's kernels do.
"""

from __future__ import annotations

from typing import Any, ClassVar

import sympy

from symgrad.language import activations, functions


class Pullback(sympy.Function):
    """grad * d f / d x for one function f; never evaluated symbolically."""

    nargs = 2
    # The language name of f.
    function: ClassVar[str]
    # Whether the second argument is f's value (tanh, sigmoid) rather than its input.
    through_value: ClassVar[bool] = False

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def grad(self) -> sympy.Expr:
        return self.args[0]

    @property
    def point(self) -> sympy.Expr:
        """The input of f, or its value where `through_value`."""
        return self.args[1]

    def slope(self) -> sympy.Expr:
        """d f / d x at the point, in language functions."""
        raise NotImplementedError

    def expanded(self) -> sympy.Expr:
        """The pullback written out: grad times the slope."""
        return self.grad * self.slope()

    def _sympystr(self, printer: Any) -> str:
        """Shown (symgrad show, docstrings) as the product it stands for."""
        text: str = printer._print(self.expanded())
        return text

    _latex = _pretty = _sympystr

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        if argindex == 1:
            return self.slope()
        stand_in = sympy.Dummy("point", real=True)
        slope = type(self)(self.grad, stand_in).expanded()
        return sympy.diff(slope, stand_in).xreplace({stand_in: self.point})


class _ActivationPullback(Pullback):
    activation: ClassVar[type[activations.Activation]]

    def slope(self) -> sympy.Expr:
        slope = self.activation(self.point).slope()
        assert slope is not None, self.function
        return slope


class SiluPullback(_ActivationPullback):
    function, activation = "silu", activations.Silu


class MishPullback(_ActivationPullback):
    function, activation = "mish", activations.Mish


class GeluPullback(_ActivationPullback):
    function, activation = "gelu", activations.Gelu


class GeluTanhPullback(_ActivationPullback):
    function, activation = "gelu_tanh", activations.GeluTanh


class _FunctionPullback(Pullback):
    """The pullback of a language function, by its rule in the function table."""

    def slope(self) -> sympy.Expr:
        node = self.point if self.through_value else functions.call(self.function, self.point)
        return functions.FUNCTIONS[self.function].derivative(node, 0)


class SoftplusPullback(_FunctionPullback):
    function = "softplus"


class TanhPullback(_FunctionPullback):
    function, through_value = "tanh", True


class SigmoidPullback(_FunctionPullback):
    function, through_value = "sigmoid", True


PULLBACKS: dict[str, type[Pullback]] = {
    kind.function: kind
    for kind in (
        SiluPullback,
        MishPullback,
        GeluPullback,
        GeluTanhPullback,
        SoftplusPullback,
        TanhPullback,
        SigmoidPullback,
    )
}


def function_name(node: sympy.Basic) -> str | None:
    """The language name of a call node, or None for anything else."""
    if isinstance(node, activations.Activation):
        return node.name
    if isinstance(node, functions.ElementwiseFunction):
        return type(node).__name__
    return None


def pullback(node: sympy.Basic, grad: sympy.Expr) -> sympy.Expr | None:
    """grad * d node / d its input as one pullback node, or None where torch has no kernel."""
    name = function_name(node)
    kind = PULLBACKS.get(name) if name is not None else None
    if kind is None or len(node.args) != 1:
        return None
    return kind(grad, node if kind.through_value else node.args[0])


def expand_pullbacks(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every pullback written out as its product (for reading, not running)."""
    expanded: sympy.Expr = expr.replace(
        lambda node: isinstance(node, Pullback), lambda node: node.expanded()
    )
    return expanded
