"""What every activation of the language is: a kink printed as torch's fused kernel.

The activations themselves are in symgrad.language.activations (torch.nn.functional's)
and symgrad.language.losses (its elementwise losses).
"""

from __future__ import annotations

from typing import ClassVar

import sympy

from symgrad.language import piecewise


class Activation(piecewise.Kink):
    """An activation: torch's fused kernel forward, a derived backward."""

    # The name in the spec language.
    name: ClassVar[str]
    # torch's function, called with the input then every parameter as a keyword.
    torch_function: ClassVar[str]
    # (torch's keyword, default) for each number parameter, in torch's order.
    parameters: ClassVar[tuple[tuple[str, float], ...]] = ()
    # Fixed keyword arguments of the torch call, as printed (gelu's approximate="tanh").
    torch_options: ClassVar[str] = ""

    @property
    def input(self) -> sympy.Expr:
        return self.args[0]

    def breakpoints(self) -> list[tuple[sympy.Expr, sympy.Expr]]:
        """(argument, value) pairs where the gradient jumps: the generated test samples them."""
        return []

    @classmethod
    def check_parameters(cls, values: tuple[sympy.Expr, ...]) -> str | None:
        """Why constant parameter values would make torch raise, or None."""
        return None

    def slope(self) -> sympy.Expr | None:
        """d self / d input as torch's backward computes it, or None to derive it from
        `expanded` (softsign and tanhshrink, which torch itself composes)."""
        return None

    def partial(self, index: int) -> sympy.Expr | None:
        # The parameters are numbers, never differentiated.
        return self.slope() if index == 0 else sympy.Integer(0)


def constant_parameter(value: sympy.Expr) -> float | None:
    """The value of a constant parameter, None for one that depends on a number input."""
    return float(value) if value.is_number else None
