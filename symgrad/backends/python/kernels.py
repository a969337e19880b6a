"""torch's backward kernels for the language's pullbacks (symgrad.language.pullbacks).

A kernel with a derivative of its own is called as it is: double backward
differentiates it. `silu_backward` and `mish_backward` have none, so the module calls
them through a helper that computes the pullback with plain torch operations when the
backward runs with grad mode on (create_graph=True), as torch's own derivative of silu
does; the kernel runs otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kernel:
    """How one pullback is called: `{grad}` and `{point}` stand for its two arguments."""

    call: str
    # Whether autograd can differentiate the kernel (double backward through it).
    differentiable: bool = True


KERNELS: dict[str, Kernel] = {
    "silu": Kernel("torch.ops.aten.silu_backward({grad}, {point})", differentiable=False),
    "mish": Kernel("torch.ops.aten.mish_backward({grad}, {point})", differentiable=False),
    # On CPU its oneDNN path fails unless both arguments have one shape.
    "gelu": Kernel("torch.ops.aten.gelu_backward(*torch.broadcast_tensors({grad}, {point}))"),
    "gelu_tanh": Kernel('torch.ops.aten.gelu_backward({grad}, {point}, approximate="tanh")'),
    "softplus": Kernel("torch.ops.aten.softplus_backward({grad}, {point}, 1.0, 20.0)"),
    "tanh": Kernel("torch.ops.aten.tanh_backward({grad}, {point})"),
    "sigmoid": Kernel("torch.ops.aten.sigmoid_backward({grad}, {point})"),
}


def helper_role(function: str) -> str:
    """The helper's role in `BackwardNames.helpers` for a kernel without a derivative."""
    return f"{function}_backward"


HELPER_ROLES = tuple(helper_role(name) for name, k in KERNELS.items() if not k.differentiable)
