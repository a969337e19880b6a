"""Bytes saved for backward: generated Functions against eager autograd and the originals.

Real hand-written Functions save less than a literal formula's autograd graph: a bool
mask where a float would do, a per-row statistic rather than a full-size tensor. Each
case here is one of them written as a spec, with the original's saved tensors listed by
shape and dtype (read from its `save_for_backward`), so that its bytes are computed, not
guessed. The generated Function's and eager autograd's bytes are measured with saved-tensor
hooks, counting each storage once (an input saved twice is one tensor), and the peak of
one forward+backward beside them.

    python -m bench.memory [--rows N] [--save]

writes build/bench/memory.md, or bench/results/memory.md with --save.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import symgrad
from bench import machine
from bench.measure import make_step, measure_peak, measure_saved, time_interleaved

RESULTS = Path("bench/results/memory.md")
SCRATCH = Path("build/bench/memory.md")
CHANNELS = 1024
Tensor = torch.Tensor


@dataclass(frozen=True)
class MemoryCase:
    """One real Function as a spec, the same formula in torch, and what the original saves."""

    name: str
    # Where the original lives, for the report.
    origin: str
    spec: dict[str, Any]
    # The literal formula in plain torch, as eager autograd sees it.
    formula: Callable[..., Tensor]
    # The inputs for `rows` rows of CHANNELS, in the spec's order.
    make_inputs: Callable[[int], tuple[Tensor, ...]]
    # What the original saves, as (shape, dtype) of `rows`; inputs it saves count too.
    original_saves: Callable[[int], list[tuple[tuple[int, ...], torch.dtype]]]


def _x(rows: int) -> Tensor:
    return torch.randn(rows, CHANNELS).requires_grad_()


def _full(rows: int, dtype: torch.dtype = torch.float32) -> tuple[tuple[int, ...], torch.dtype]:
    return (rows, CHANNELS), dtype


def _channels(dtype: torch.dtype = torch.float32) -> tuple[tuple[int, ...], torch.dtype]:
    return (CHANNELS,), dtype


def _gelu_tanh(u: Tensor) -> Tensor:
    return 0.5 * u * (1 + torch.tanh(0.79788456 * u * (1 + 0.044715 * u * u)))


_GELU_TANH = "0.5 * u * (1 + tanh(0.79788456 * u * (1 + 0.044715 * u * u)))"


def _fake_quantize(x: Tensor, scale: float, zero: float, low: float, high: float) -> Tensor:
    q = torch.clamp(torch.round(x / scale) + zero, low, high)
    return (q - zero) * scale


CASES: tuple[MemoryCase, ...] = (
    MemoryCase(
        "bias_gelu",
        "Megatron-LM, flash-attn: GeLUFunction (bias_gelu)",
        {
            "name": "BiasGeLU",
            "inputs": {"x": "tensor", "bias": {"type": "tensor", "shape": [CHANNELS]}},
            "where": {"u": "x + bias"},
            "outputs": {"y": _GELU_TANH},
        },
        lambda x, bias: _gelu_tanh(x + bias),
        lambda rows: (_x(rows), torch.randn(CHANNELS).requires_grad_()),
        lambda rows: [_full(rows), _channels()],
    ),
    MemoryCase(
        "fast_gelu",
        "flash-attn: FastGeLUFunction",
        {
            "name": "FastGeLU",
            "inputs": {"x": "tensor"},
            "outputs": {"y": _GELU_TANH.replace("u", "x")},
        },
        _gelu_tanh,
        lambda rows: (_x(rows),),
        lambda rows: [_full(rows)],
    ),
    MemoryCase(
        "dyt",
        "Liger-Kernel: LigerDyTFunction",
        {
            "name": "DyT",
            "inputs": {
                "x": "tensor",
                "alpha": {"type": "tensor", "shape": [1]},
                "gamma": {"type": "tensor", "shape": [CHANNELS]},
                "beta": {"type": "tensor", "shape": [CHANNELS]},
            },
            "outputs": {"y": "gamma * tanh(alpha * x) + beta"},
        },
        lambda x, alpha, gamma, beta: gamma * torch.tanh(alpha * x) + beta,
        lambda rows: (
            _x(rows),
            torch.full((1,), 0.5).requires_grad_(),
            torch.randn(CHANNELS).requires_grad_(),
            torch.randn(CHANNELS).requires_grad_(),
        ),
        lambda rows: [_full(rows), ((1,), torch.float32), _channels()],
    ),
    MemoryCase(
        "rms_norm",
        "apex: FusedRMSNormAffineFunction",
        {
            "name": "RMSNorm",
            "inputs": {
                "x": "tensor",
                "weight": {"type": "tensor", "shape": [CHANNELS]},
                "eps": {"type": "float", "default": 1e-5},
            },
            "outputs": {"y": "x / sqrt(mean(x**2, dim=-1, keepdim=True) + eps) * weight"},
        },
        lambda x, w: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w,
        lambda rows: (_x(rows), torch.randn(CHANNELS).requires_grad_()),
        lambda rows: [_full(rows), _channels(), ((rows,), torch.float32)],
    ),
    MemoryCase(
        "fake_quantize",
        "torchao: _FakeQuantizeFunction (straight-through inside the range)",
        {
            "name": "FakeQuantize",
            "inputs": {
                "x": "tensor",
                "scale": {"type": "float", "default": 0.05},
                "zero": {"type": "float", "default": 3.0},
                "low": {"type": "float", "default": -128.0},
                "high": {"type": "float", "default": 127.0},
            },
            "where": {"q": "clamp(round(x / scale) + zero, low, high)"},
            "outputs": {"y": "(q - zero) * scale"},
            "gradients": {
                "y": {
                    "x": "where(round(x / scale) + zero >= low "
                    "and round(x / scale) + zero <= high, 1, 0)"
                }
            },
        },
        lambda x: _fake_quantize(x, 0.05, 3.0, -128.0, 127.0),
        lambda rows: (_x(rows),),
        lambda rows: [_full(rows, torch.bool)],
    ),
    MemoryCase(
        "abs_binary_sign",
        "brevitas: AbsBinarySignGradFn",
        {
            "name": "AbsBinarySign",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "abs(x)"},
            "gradients": {"y": {"x": "where(x >= 0, 1, -1)"}},
        },
        torch.abs,
        lambda rows: (_x(rows),),
        lambda rows: [_full(rows, torch.int8)],
    ),
)


def _weighted_squared_relu(x: Tensor, weights: Tensor) -> Tensor:
    return (torch.tanh(torch.relu(x)) ** 2) * weights


CASES += (
    MemoryCase(
        "weighted_squared_relu",
        "Megatron-LM: WeightedSquaredReLUFunction (clamp_scale 1)",
        {
            "name": "WeightedSquaredRelu",
            "inputs": {
                "x": {"type": "tensor", "shape": [4, CHANNELS]},
                "weights": {"type": "tensor", "shape": [4, 1]},
            },
            "outputs": {"y": "tanh(relu(x))**2 * weights"},
        },
        _weighted_squared_relu,
        lambda rows: (_x(rows), torch.rand(rows, 1).requires_grad_()),
        lambda rows: [_full(rows), ((rows, 1), torch.float32)],
    ),
)
# The spec's `save:` choices (Note [Save choices] in symgrad.ad.saving), each measured.
SAVES = ("balanced", "memory", "speed")


def _nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def measure(case: MemoryCase, rows: int, repeats: int = 5) -> dict[str, float | None]:
    """Saved bytes of the original (computed), eager autograd and the generated Function
    under each `save:` choice, with the peak bytes and median seconds of one fwd+bwd."""
    inputs = case.make_inputs(rows)
    grad = torch.ones_like(case.formula(*inputs))
    cpu = torch.device("cpu")
    functions = {"eager": case.formula} | {save: _generated(case, save) for save in SAVES}
    steps = {name: make_step(fn, inputs, grad) for name, fn in functions.items()}
    seconds = time_interleaved(steps, repeats, warmup=1, device=cpu)
    found: dict[str, float | None] = {
        "original": sum(_nbytes(s, d) for s, d in case.original_saves(rows))
    }
    for name, fn in functions.items():
        found[name] = measure_saved(fn, inputs).nbytes
        found[f"{name} peak"] = measure_peak(steps[name], cpu)
        found[f"{name} ms"] = statistics.median(seconds[name]) * 1e3
    return found


def _generated(case: MemoryCase, save: str) -> Callable[..., Tensor]:
    """The case's generated Function under `save:`, called with the spec's default numbers."""
    spec = symgrad.spec_from_dict({**case.spec, "save": save})
    function = getattr(symgrad.load_module(spec), spec.module)  # residual outputs hidden
    declared = [v for v in case.spec["inputs"].values() if isinstance(v, dict)]
    numbers = [v["default"] for v in declared if v.get("type") == "float"]

    def generated(*tensors: Tensor) -> Tensor:
        result: Tensor = function(*tensors, *numbers)
        return result

    return generated


def _megabytes(count: float | None) -> str:
    return "-" if count is None else f"{count / 2**20:.2f}"


def render(results: dict[str, dict[str, float | None]], rows: int, argv: Sequence[str]) -> str:
    """The markdown table: MiB saved by each, peak MiB of forward+backward (torch's
    profiler's CPU allocations) and its median milliseconds, per `save:` choice."""
    choices = ["eager", *SAVES]
    lines = [
        "# symgrad benchmark: bytes saved for backward",
        "",
        f"Machine: {machine.describe(torch.device('cpu'), torch.get_num_threads())}",
        "",
        f"Inputs [{rows}, {CHANNELS}] float32; fwd+bwd ms the median of interleaved rounds.",
        "",
        f"Command: `{' '.join(['python -m bench.memory', *argv])}`",
        "",
        "Generated columns are the spec's `save:` choice. `memory` saves at most what the "
        "original saves where the formula allows it; `balanced` (the default) at most "
        "eager's; `speed` may save more than eager to skip recomputation.",
        "",
        "| case | origin | saved MiB: original | "
        + " | ".join(choices)
        + " | peak MiB: "
        + " | ".join(choices)
        + " | fwd+bwd ms: "
        + " | ".join(choices)
        + " |",
        "| --- | --- |" + " --: |" * (1 + 3 * len(choices)),
    ]
    origins = {case.name: case.origin for case in CASES}
    for name, found in results.items():
        saved = [_megabytes(found[c]) for c in ["original", *choices]]
        peaks = [_megabytes(found[f"{c} peak"]) for c in choices]
        times = [f"{found[f'{c} ms'] or 0:.2f}" for c in choices]
        lines.append(f"| {name} | {origins[name]} | " + " | ".join(saved + peaks + times) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every case and write the report."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024, help="rows of 1024 channels")
    parser.add_argument("--save", action="store_true", help="write bench/results/memory.md")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--repeats", type=int, default=5, help="timed fwd+bwd per choice")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    chosen = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    results = {case.name: measure(case, args.rows, args.repeats) for case in chosen}
    text = render(results, args.rows, argv)
    output = RESULTS if args.save else SCRATCH
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
