"""torch's backward kernels for the language's pullbacks (symgrad.language.pullbacks).

Where torch's CPU kernel is slow, a `CpuForm` computes the same value with cheaper torch
operations on CPU tensors (mish: one exp instead of the several of softplus and tanh).
It is used where the cost table (symgrad.ad.costs) measured it cheaper than the kernel.

A kernel with a derivative of its own is called as it is: double backward
differentiates it. `silu_backward` and `mish_backward` have none, so the module calls
them through a helper that computes the pullback with plain torch operations when the
backward runs with grad mode on (create_graph=True), as torch's own derivative of silu
does; the kernel runs otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from symgrad.ad import costs


@dataclass(frozen=True)
class Kernel:
    """How one pullback is called: `{grad}` and `{point}` stand for its two arguments."""

    call: str
    # Whether autograd can differentiate the kernel (double backward through it).
    differentiable: bool = True
    # What runs instead on CPU tensors, where torch's kernel is the slow one.
    cpu: CpuForm | None = None


@dataclass(frozen=True)
class CpuForm:
    """Statements on `x` (and `grad`) ending in a result, replacing a kernel on CPU."""

    # Why, for the helper's comment.
    reason: str
    lines: tuple[str, ...]
    result: str


# tanh(softplus(x)) = n / q with e = exp(x), n = e (e + 2), q = n + 2, and mish'(x) =
# (n q + 4 x e (e + 1)) / q**2, where e (e + 1) = n - e. e is capped at exp(20), past which
# tanh(softplus(x)) is 1 in float32 and float64 (float16 would overflow: those dtypes keep
# the kernel). In place on fresh temporaries only, and only with grad mode off: nothing
# records them.
_MISH_REASON = "torch's CPU mish kernels cost several exps; tanh(softplus(x)) = n / (n + 2)"
MISH_FORWARD = CpuForm(
    _MISH_REASON,
    ("e = x.clamp(max=20.0).exp_()", "n = (e + 2).mul_(e)"),
    "(n * x).div_(n.add_(2))",
)
_MISH_BACKWARD = CpuForm(
    _MISH_REASON,
    (
        "c = x.clamp(max=20.0)",
        "e = c.exp()",
        "n = (e + 2).mul_(e)",
        "q = n + 2",
        "slope = torch.addcmul(n * q, e.sub_(n), c, value=-4)",
    ),
    "(grad * slope).div_(q.mul_(q))",
)


# A CPU form runs several kernels where torch's runs one: below this many elements the
# calls cost more than the exps saved. Measured one thread, float32, on an AMD EPYC: at 4096
# elements the mish forward form equals F.mish and its backward costs 1.2x mish_backward;
# at 16384 they cost 0.54x and 0.67x.
CPU_FORM_MIN_ELEMENTS = 1 << 13


# Every CPU form, by the kernel or activation it can replace; the cost table
# (symgrad.ad.costs, `python -m bench --calibrate`) has each one's time as `<name>.cpu_form`.
CPU_FORMS = {"mish": MISH_FORWARD, "mish_backward": _MISH_BACKWARD}


def _if_cheaper(name: str) -> CpuForm | None:
    """The CPU form of `name` when the cost table measured it cheaper than torch's kernel."""
    return CPU_FORMS[name] if costs.table().cheaper(f"{name}.cpu_form", name) else None


KERNELS: dict[str, Kernel] = {
    "silu": Kernel("torch.ops.aten.silu_backward({grad}, {point})", differentiable=False),
    "mish": Kernel(
        "torch.ops.aten.mish_backward({grad}, {point})",
        differentiable=False,
        cpu=_if_cheaper("mish_backward"),
    ),
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


# Activations whose forward a helper computes, with its CPU form.
FORWARD_FORMS = {name: form for name in ("mish",) if (form := _if_cheaper(name)) is not None}


def block_role(role: str) -> str:
    """The role of the helper holding the CPU form of helper `role`."""
    return f"{role}_block"


HELPER_ROLES = (
    *(helper_role(name) for name, k in KERNELS.items() if not k.differentiable),
    *FORWARD_FORMS,
    *(block_role(helper_role(name)) for name, k in KERNELS.items() if k.cpu),
    *(block_role(name) for name in FORWARD_FORMS),
    "in_blocks",
)
