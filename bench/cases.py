"""The benchmark cases: each spec with the same formula in plain torch, torch's built-in, inputs.

The reference functions are the literal formulas of `bench/specs/`, written with plain torch
operations the way a user would write them before reaching for a custom Function; eager
autograd of them is the baseline every ratio is taken against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as nnf

SPECS = Path(__file__).parent / "specs"
# Channels of the [N, C] cases (a typical hidden size); N = elements // CHANNELS.
CHANNELS = 1024

Tensor = torch.Tensor
Fn = Callable[..., Tensor]
MakeInputs = Callable[[int, torch.device], tuple[Tensor, ...]]


@dataclass(frozen=True)
class Case:
    """One formula: its spec, the formula in plain torch, torch's built-in and its inputs."""

    # Row label; the spec is bench/specs/<name>.yaml.
    name: str
    # The literal formula in plain torch ops; same arguments as the generated function.
    reference: Fn
    # Tensor inputs for about `elements` elements, in the spec's order, requires_grad set.
    make_inputs: MakeInputs
    # torch's own implementation of the formula, or None where torch has none.
    builtin: Fn | None = None
    # Non-tensor arguments, passed by keyword to every alternative.
    numbers: Mapping[str, float] = field(default_factory=dict)

    @property
    def spec_path(self) -> Path:
        """The YAML spec symgrad generates this case's Function from."""
        return SPECS / f"{self.name}.yaml"


def _rows(elements: int) -> int:
    """Rows of an [N, CHANNELS] input holding about `elements` elements."""
    return max(1, elements // CHANNELS)


def _leaf(tensor: Tensor, requires_grad: bool = True) -> Tensor:
    """A float32 leaf tensor, the way a parameter or an activation enters the formula."""
    return tensor.float().requires_grad_(requires_grad)


def _uniform(shape: tuple[int, ...], low: float, high: float, device: torch.device) -> Tensor:
    """Uniform samples in [low, high)."""
    return torch.empty(shape, device=device).uniform_(low, high)


def _flat(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """One standard-normal input x of `elements` elements."""
    return (_leaf(torch.randn(elements, device=device)),)


def _matrix(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """One standard-normal input x of shape [N, CHANNELS]."""
    return (_leaf(torch.randn(_rows(elements), CHANNELS, device=device)),)


def _swish_inputs(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """x [N, C] and a per-channel slope beta [C] in [0.5, 2]."""
    beta = _uniform((CHANNELS,), 0.5, 2.0, device)
    return (_matrix(elements, device)[0], _leaf(beta))


def _huber_inputs(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """Predictions x and a target without gradient, about half of them within delta."""
    target = torch.randn(elements, device=device)
    return (_flat(elements, device)[0], _leaf(target, requires_grad=False))


def _pair_inputs(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """Distances r in [0.8, 3], charge products q in [-1, 1], sizes s in [0.9, 1.1]."""
    shape = (elements,)
    ranges = ((0.8, 3.0), (-1.0, 1.0), (0.9, 1.1))
    return tuple(_leaf(_uniform(shape, low, high, device)) for low, high in ranges)


def _gate_inputs(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """The value and the gate halves of a GEGLU input, each [N, C]."""
    return (_matrix(elements, device)[0], _matrix(elements, device)[0])


def _focal_inputs(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """Logits and 0/1 targets without gradient, about a quarter of them positive."""
    target = (torch.rand(elements, device=device) < 0.25).float()
    return (_flat(elements, device)[0], _leaf(target, requires_grad=False))


def _norm_inputs(elements: int, device: torch.device, affine: int) -> tuple[Tensor, ...]:
    """x [N, C] and `affine` per-channel parameters (weight, then bias)."""
    weight = _leaf(_uniform((CHANNELS,), 0.5, 1.5, device))
    bias = _leaf(0.1 * torch.randn(CHANNELS, device=device))
    return (_matrix(elements, device)[0], weight, bias)[: 1 + affine]


def softplus(x: Tensor) -> Tensor:
    """Softplus, literally."""
    return torch.log(1 + torch.exp(x))


def gelu_erf(x: Tensor) -> Tensor:
    """GELU, erf form."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU, tanh approximation."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def mish(x: Tensor) -> Tensor:
    """Mish."""
    return x * torch.tanh(nnf.softplus(x))


def swish_beta(x: Tensor, beta: Tensor) -> Tensor:
    """Swish with a slope per channel."""
    return x * torch.sigmoid(beta * x)


def huber(x: Tensor, target: Tensor, delta: float = 1.0) -> Tensor:
    """Huber loss, averaged."""
    d = x - target
    a = torch.abs(d)
    return torch.mean(torch.where(a < delta, 0.5 * d**2, delta * (a - 0.5 * delta)), dim=-1)


def screened_lj(r: Tensor, q: Tensor, s: Tensor) -> Tensor:
    """Lennard-Jones plus screened Coulomb pair energy under a smooth cutoff (33 ops)."""
    u6 = (s / r) ** 6
    lj = 4 * (u6**2 - u6)
    coul = q * torch.exp(-r / 2.5) / r
    z = (r - 2.0) / 0.5
    cut = 0.5 * (1 - torch.tanh(z))
    bend = 1 + 0.1 * torch.sin(3 * r) * torch.exp(-0.5 * (r - 1.5) ** 2)
    return (lj + coul) * cut * bend + 0.05 * torch.log1p(q**2) * torch.sigmoid(z)


def silu(x: Tensor) -> Tensor:
    """SiLU, literally."""
    return x * torch.sigmoid(x)


def geglu(value: Tensor, gate: Tensor) -> Tensor:
    """GEGLU with the tanh approximation of GELU written out."""
    inner = 0.7978845608028654 * (gate + 0.044715 * gate**3)
    return value * 0.5 * gate * (1 + torch.tanh(inner))


def focal_loss(logits: Tensor, target: Tensor, alpha: float = 0.25, gamma: float = 2.0) -> Tensor:
    """Binary focal loss of logits, averaged."""
    p = torch.sigmoid(logits)
    p_t = p * target + (1 - p) * (1 - target)
    alpha_t = alpha * target + (1 - alpha) * (1 - target)
    return torch.mean(-alpha_t * (1 - p_t) ** gamma * torch.log(p_t), dim=-1)


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dimension."""
    r = 1 / torch.sqrt(torch.mean(x**2, dim=-1, keepdim=True) + eps)
    return x * r * w


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dimension."""
    mu = torch.mean(x, dim=-1, keepdim=True)
    xc = x - mu
    var = torch.mean(xc**2, dim=-1, keepdim=True)
    return xc / torch.sqrt(var + eps) * w + b


def softmax(x: Tensor) -> Tensor:
    """Softmax over the last dimension, through logsumexp."""
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))


def log_softmax(x: Tensor) -> Tensor:
    """Log-softmax over the last dimension, through logsumexp."""
    return x - torch.logsumexp(x, dim=-1, keepdim=True)


def _geglu_builtin(value: Tensor, gate: Tensor) -> Tensor:
    return value * nnf.gelu(gate, approximate="tanh")


def _log_softmax_builtin(x: Tensor) -> Tensor:
    return torch.log_softmax(x, dim=-1)


def _gelu_tanh_builtin(x: Tensor) -> Tensor:
    """torch's tanh-approximated GELU."""
    return nnf.gelu(x, approximate="tanh")


def _huber_builtin(x: Tensor, target: Tensor, delta: float = 1.0) -> Tensor:
    """torch's Huber loss, averaged."""
    return nnf.huber_loss(x, target, delta=delta)


def _rms_norm_builtin(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    """torch's RMSNorm over the last dimension."""
    return nnf.rms_norm(x, w.shape, w, eps)


def _layer_norm_builtin(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """torch's LayerNorm over the last dimension."""
    return nnf.layer_norm(x, w.shape, w, b, eps)


def _softmax_builtin(x: Tensor) -> Tensor:
    """torch's softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def _norm1(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """RMSNorm's inputs: x and a weight."""
    return _norm_inputs(elements, device, affine=1)


def _norm2(elements: int, device: torch.device) -> tuple[Tensor, ...]:
    """LayerNorm's inputs: x, a weight and a bias."""
    return _norm_inputs(elements, device, affine=2)


CASES: tuple[Case, ...] = (
    Case("softplus", softplus, _flat, nnf.softplus),
    Case("gelu_erf", gelu_erf, _flat, nnf.gelu),
    Case("gelu_tanh", gelu_tanh, _flat, _gelu_tanh_builtin),
    Case("mish", mish, _flat, nnf.mish),
    Case("swish_beta", swish_beta, _swish_inputs),
    Case("huber", huber, _huber_inputs, _huber_builtin, {"delta": 1.0}),
    Case("screened_lj", screened_lj, _pair_inputs),
    Case("rms_norm", rms_norm, _norm1, _rms_norm_builtin, {"eps": 1e-6}),
    Case("layer_norm", layer_norm, _norm2, _layer_norm_builtin, {"eps": 1e-5}),
    Case("softmax", softmax, _matrix, _softmax_builtin),
    Case("log_softmax", log_softmax, _matrix, _log_softmax_builtin),
    Case("silu", silu, _flat, nnf.silu),
    Case("geglu", geglu, _gate_inputs, _geglu_builtin),
    Case("focal_loss", focal_loss, _focal_inputs, None, {"alpha": 0.25, "gamma": 2.0}),
)


def select_cases(names: tuple[str, ...] | None) -> tuple[Case, ...]:
    """The cases named (all of them for None), in the order given; unknown names are errors."""
    if names is None:
        return CASES
    by_name = {case.name: case for case in CASES}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return tuple(by_name[name] for name in names)
