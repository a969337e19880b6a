"""Constants of a tensor's dtype: `finfo_eps(x)`, torch.finfo(x.dtype).eps at call time.

Note [Dtype constants]: `finfo_eps(x)` is the machine epsilon of the tensor input `x`'s
dtype, read when the Function is called: float32's in float32, float64's in float64,
as pyro's `torch.finfo(x.dtype).eps` guards. A spec could otherwise only freeze one
dtype's value. It depends on the dtype, never on the values, so every derivative of it
is zero. Backends spell it as a 0-d tensor of `x`'s dtype on its device, so that it is
a tensor wherever the printers take it for one and promotes nothing.
"""

from __future__ import annotations

from typing import Any

import sympy

# The spelling in the language.
FINFO_EPS = "finfo_eps"

# torch.finfo(dtype).eps of the floating dtypes a generated Function takes.
EPSILONS = {
    "float64": 2.0**-52,
    "float32": 2.0**-23,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
}


class FinfoEps(sympy.Function):
    """`FinfoEps(x)`: the machine epsilon of the tensor input `x`'s dtype."""

    name = FINFO_EPS

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    def _eval_is_positive(self) -> bool:
        return True

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        """Zero: the value depends on the dtype only (Note [Dtype constants])."""
        return sympy.Integer(0)

    @property
    def argument(self) -> sympy.Symbol:
        result: sympy.Symbol = self.args[0]
        return result
