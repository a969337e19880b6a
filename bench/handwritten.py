# mypy: disable-error-code="no-untyped-call,no-any-return"
# (Function.apply is untyped in torch; torch functions return Any under it.)
"""A minimal hand-written autograd Function per bench case: the per-call baseline.

Each follows PyTorch's tutorial pattern ("Extending PyTorch"): the forward with torch's own
kernel where one exists (else the formula in plain torch), `save_for_backward` of the
inputs (of the output where the backward is written in it, as softmax's is), and the exact
backward written by hand. Nothing else: no jvp, no vmap rule, no argument checks. The
generated Function does more (vmap, jvp, torch.compile, double backward); bench/small.py
times what that costs per call. Each has the signature of the generated convenience
function, so either runs the same step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as nnf

Tensor = torch.Tensor
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _gelu_tanh_slope(x: Tensor) -> tuple[Tensor, Tensor]:
    """gelu_tanh(x) and its derivative, for GELU and GEGLU."""
    t = torch.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))
    value = 0.5 * x * (1 + t)
    slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 0.134145 * x * x)
    return value, slope


class Softplus(torch.autograd.Function):
    """softplus; d/dx = sigmoid(x)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return nnf.softplus(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


class GeluErf(torch.autograd.Function):
    """GELU (erf); d/dx = Phi(x) + x phi(x)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return nnf.gelu(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        cdf = 0.5 * (1 + torch.erf(x * math.sqrt(0.5)))
        return g * (cdf + x * torch.exp(-0.5 * x * x) * _INV_SQRT_2PI)


class GeluTanh(torch.autograd.Function):
    """GELU (tanh approximation)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return nnf.gelu(x, approximate="tanh")

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _gelu_tanh_slope(x)[1]


class Mish(torch.autograd.Function):
    """mish; d/dx = tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return nnf.mish(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        t = torch.tanh(nnf.softplus(x))
        return g * (t + x * (1 - t * t) * torch.sigmoid(x))


class SwishBeta(torch.autograd.Function):
    """x * sigmoid(beta * x), beta per channel."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, beta: Tensor) -> Tensor:
        ctx.save_for_backward(x, beta)
        return x * torch.sigmoid(beta * x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        gs = g * x * s * (1 - s)
        return g * s + gs * beta, (gs * x).sum_to_size(beta.shape)


class HuberMean(torch.autograd.Function):
    """Huber loss averaged over the last dim; the target has no gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, target: Tensor, delta: float) -> Tensor:
        ctx.save_for_backward(x, target)
        ctx.delta = delta
        return nnf.huber_loss(x, target, reduction="none", delta=delta).mean(-1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        x, target = ctx.saved_tensors
        d = x - target
        slope = torch.where(d.abs() < ctx.delta, d, ctx.delta * torch.sign(d))
        return slope * (g.unsqueeze(-1) / x.shape[-1]), None, None


class ScreenedLJ(torch.autograd.Function):
    """The screened Lennard-Jones pair energy, its three partials written out."""

    @staticmethod
    def forward(ctx: Any, r: Tensor, q: Tensor, s: Tensor) -> Tensor:
        ctx.save_for_backward(r, q, s)
        u6 = (s / r) ** 6
        coul = q * torch.exp(-r / 2.5) / r
        z = (r - 2.0) / 0.5
        bend = 1 + 0.1 * torch.sin(3 * r) * torch.exp(-0.5 * (r - 1.5) ** 2)
        tail = 0.05 * torch.log1p(q * q) * torch.sigmoid(z)
        return (4 * (u6 * u6 - u6) + coul) * (0.5 * (1 - torch.tanh(z))) * bend + tail

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r, q, s = ctx.saved_tensors
        u6 = (s / r) ** 6
        screen = torch.exp(-r / 2.5) / r
        t, sig = torch.tanh(2 * r - 4.0), torch.sigmoid(2 * r - 4.0)
        cut = 0.5 * (1 - t)
        wave = 0.1 * torch.exp(-0.5 * (r - 1.5) ** 2)
        bend = 1 + wave * torch.sin(3 * r)
        energy = 4 * (u6 * u6 - u6) + q * screen
        dlj_du6 = 4 * (2 * u6 - 1)
        dr = (dlj_du6 * (-6 * u6 / r) - q * screen * (0.4 + 1 / r)) * cut * bend
        dr = dr - energy * (1 - t * t) * bend
        dr = dr + energy * cut * wave * (3 * torch.cos(3 * r) - (r - 1.5) * torch.sin(3 * r))
        dr = dr + 0.1 * torch.log1p(q * q) * sig * (1 - sig)
        dq = screen * cut * bend + 0.1 * q / (1 + q * q) * sig
        ds = dlj_du6 * (6 * u6 / s) * cut * bend
        return g * dr, g * dq, g * ds


class RMSNorm(torch.autograd.Function):
    """RMSNorm over the last dim with a weight."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, eps: float) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.eps = eps
        return nnf.rms_norm(x, w.shape, w, eps)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, None]:
        x, w = ctx.saved_tensors
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        xhat = x * r
        gxhat = g * w
        gx = r * (gxhat - xhat * (gxhat * xhat).mean(-1, keepdim=True))
        return gx, (g * xhat).sum_to_size(w.shape), None


class LayerNorm(torch.autograd.Function):
    """LayerNorm over the last dim with a weight and a bias."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
        ctx.save_for_backward(x, w)
        ctx.eps = eps
        return nnf.layer_norm(x, w.shape, w, b, eps)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        x, w = ctx.saved_tensors
        var, mu = torch.var_mean(x, -1, correction=0, keepdim=True)
        rstd = torch.rsqrt(var + ctx.eps)
        xhat = (x - mu) * rstd
        gxhat = g * w
        mean_g = gxhat.mean(-1, keepdim=True)
        gx = rstd * (gxhat - mean_g - xhat * (gxhat * xhat).mean(-1, keepdim=True))
        return gx, (g * xhat).sum_to_size(w.shape), g.sum_to_size(w.shape), None


class Softmax(torch.autograd.Function):
    """Softmax over the last dim; the backward reads the output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


class LogSoftmax(torch.autograd.Function):
    """Log-softmax over the last dim; the backward reads the output."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.log_softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return g - torch.exp(y) * g.sum(-1, keepdim=True)


class SiLU(torch.autograd.Function):
    """silu; d/dx = s (1 + x (1 - s))."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return nnf.silu(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * s * (1 + x * (1 - s))


class GEGLU(torch.autograd.Function):
    """value * gelu_tanh(gate)."""

    @staticmethod
    def forward(ctx: Any, value: Tensor, gate: Tensor) -> Tensor:
        ctx.save_for_backward(value, gate)
        return value * nnf.gelu(gate, approximate="tanh")

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, Tensor]:
        value, gate = ctx.saved_tensors
        gelu, slope = _gelu_tanh_slope(gate)
        return g * gelu, g * value * slope


class FocalLoss(torch.autograd.Function):
    """Binary focal loss of logits averaged over the last dim; no gradient for the target."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, alpha: float, gamma: float) -> Tensor:
        ctx.save_for_backward(logits, target)
        ctx.numbers = alpha, gamma
        p = torch.sigmoid(logits)
        p_t = p * target + (1 - p) * (1 - target)
        alpha_t = alpha * target + (1 - alpha) * (1 - target)
        return torch.mean(-alpha_t * (1 - p_t) ** gamma * torch.log(p_t), dim=-1)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        logits, target = ctx.saved_tensors
        alpha, gamma = ctx.numbers
        p = torch.sigmoid(logits)
        p_t = p * target + (1 - p) * (1 - target)
        alpha_t = alpha * target + (1 - alpha) * (1 - target)
        rest = 1 - p_t
        dl_dpt = alpha_t * (gamma * rest ** (gamma - 1) * torch.log(p_t) - rest**gamma / p_t)
        slope = dl_dpt * p * (1 - p) * (2 * target - 1)
        return slope * (g.unsqueeze(-1) / logits.shape[-1]), None, None, None


def _apply(function: type[torch.autograd.Function]) -> Callable[..., Tensor]:
    """The Function's apply as a plain function of positional tensors."""
    return function.apply


def huber(x: Tensor, target: Tensor, delta: float = 1.0) -> Tensor:
    """Hand-written Huber loss, averaged over the last dim."""
    return HuberMean.apply(x, target, delta)


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    """Hand-written RMSNorm."""
    return RMSNorm.apply(x, w, eps)


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """Hand-written LayerNorm."""
    return LayerNorm.apply(x, w, b, eps)


def focal_loss(logits: Tensor, target: Tensor, alpha: float = 0.25, gamma: float = 2.0) -> Tensor:
    """Hand-written focal loss."""
    return FocalLoss.apply(logits, target, alpha, gamma)


# Case name (bench/cases.py) -> its hand-written function.
HANDWRITTEN: dict[str, Callable[..., Tensor]] = {
    "softplus": _apply(Softplus),
    "gelu_erf": _apply(GeluErf),
    "gelu_tanh": _apply(GeluTanh),
    "mish": _apply(Mish),
    "swish_beta": _apply(SwishBeta),
    "huber": huber,
    "screened_lj": _apply(ScreenedLJ),
    "rms_norm": rms_norm,
    "layer_norm": layer_norm,
    "softmax": _apply(Softmax),
    "log_softmax": _apply(LogSoftmax),
    "silu": _apply(SiLU),
    "geglu": _apply(GEGLU),
    "focal_loss": focal_loss,
}
