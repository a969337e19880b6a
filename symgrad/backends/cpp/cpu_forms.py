"""Cheaper ATen forms of torch's slow CPU kernels, which the C++ Function runs in blocks.

The same forms as the Python target's (symgrad.backends.python.kernels), used where the
same cost-table entry (`<name>.cpu_form`, `python -m bench --calibrate`) measured them
cheaper than torch's kernel: mish's forward and backward with one exp instead of the
several of softplus and tanh. The module's helpers (templates/cpp/function.cpp.jinja)
run them on cache-sized blocks of float32 and float64 CPU tensors with grad mode off,
and torch's kernel everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from symgrad.ad import costs


@dataclass(frozen=True)
class CpuForm:
    """C++ statements on `x` (and `grad`) ending in a result, for one block."""

    # Why, for the helper's comment.
    reason: str
    # The kernel it replaces, called as the helper is.
    kernel: str
    lines: tuple[str, ...]
    result: str


# tanh(softplus(x)) = n / q with e = exp(x), n = e (e + 2), q = n + 2; mish'(x) =
# (n q + 4 x e (e + 1)) / q**2 with e (e + 1) = n - e; e capped at exp(20), past which
# tanh(softplus(x)) is 1 in float32 and float64. In place on fresh temporaries only.
_REASON = "torch's CPU mish kernels cost several exps; tanh(softplus(x)) = n / (n + 2)"
_FORMS = {
    "mish": CpuForm(
        _REASON,
        "at::mish(x)",
        ("at::Tensor e = x.clamp_max(20.0).exp_();", "at::Tensor n = (e + 2).mul_(e);"),
        "(n * x).div_(n.add_(2))",
    ),
    "mish_backward": CpuForm(
        _REASON,
        "at::mish_backward(grad, x)",
        (
            "at::Tensor c = x.clamp_max(20.0);",
            "at::Tensor e = c.exp();",
            "at::Tensor n = (e + 2).mul_(e);",
            "at::Tensor q = n + 2;",
            "at::Tensor slope = at::addcmul(n * q, e.sub_(n), c, -4);",
        ),
        "(grad * slope).div_(q.mul_(q))",
    ),
}


def cpu_form(name: str) -> CpuForm | None:
    """The form of kernel `name` (`mish`, `mish_backward`) if the cost table prefers it."""
    if name not in _FORMS or not costs.table().cheaper(f"{name}.cpu_form", name):
        return None
    return _FORMS[name]
