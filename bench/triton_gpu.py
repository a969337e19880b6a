"""The Triton kernels of `mode: fused` against eager autograd and torch.compile, on a GPU.

`python -m bench.triton_gpu --out DIR` writes DIR/triton_gpu.md and .csv: fwd+bwd time of
each case (eager, torch.compile of the plain formula, the generated fused Function) at
1e6, 1e7 and 1e8 elements in float32 and bfloat16, the bandwidth of the fused run against
the copy bandwidth measured in the same run, the first call's cost and peak memory.
`--dry-run` runs every step once at a tiny size on the CPU (Triton's interpreter where
TRITON_INTERPRET=1 and SYMGRAD_TRITON_CPU=1 are set), to check the script itself.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import symgrad.api as api

nnf = torch.nn.functional
# name: (inputs, output formula)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "silu": ({"x": "tensor"}, "silu(x)"),
    "gelu_erf": ({"x": "tensor"}, "gelu(x)"),
    "gelu_tanh": ({"x": "tensor"}, "gelu_tanh(x)"),
    "mish": ({"x": "tensor"}, "mish(x)"),
    "softplus": ({"x": "tensor"}, "softplus(x)"),
    "swish_beta": ({"x": "tensor", "beta": "tensor"}, "x * sigmoid(beta * x)"),
    "geglu_half": ({"value": "tensor", "gate": "tensor"}, "value * gelu(gate)"),
    "swiglu_half": ({"value": "tensor", "gate": "tensor"}, "value * silu(gate)"),
    "huber_mean": (
        {"x": "tensor", "t": "tensor"},
        "mean(where(abs(x - t) < 1, 0.5 * (x - t)**2, abs(x - t) - 0.5))",
    ),
    "screened_lj": ({"r": "tensor"}, "4 * (r**-12 - r**-6) * exp(-0.5 * r)"),
}
# Each case as plain torch, what eager autograd and torch.compile run.
EAGER: dict[str, Callable[..., torch.Tensor]] = {
    "silu": nnf.silu,
    "gelu_erf": nnf.gelu,
    "gelu_tanh": lambda x: nnf.gelu(x, approximate="tanh"),
    "mish": nnf.mish,
    "softplus": nnf.softplus,
    "swish_beta": lambda x, beta: x * torch.sigmoid(beta * x),
    "geglu_half": lambda value, gate: value * nnf.gelu(gate),
    "swiglu_half": lambda value, gate: value * nnf.silu(gate),
    "huber_mean": lambda x, t: nnf.huber_loss(x, t),
    "screened_lj": lambda r: 4 * (r**-12 - r**-6) * torch.exp(-0.5 * r),
}
CHANNELS = 1024  # swish_beta's beta: one per channel, the last dim


def _module(name: str) -> Any:
    """The generated module of a case, in mode: fused."""
    inputs, formula = CASES[name]
    spec = api.spec_from_dict(
        {"name": "Case", "mode": "fused", "inputs": inputs, "outputs": {"y": formula}}
    )
    return api.load_module(dataclasses.replace(spec, module=f"bench_{name}"))


def _inputs(name: str, n: int, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
    """The case's inputs at `n` elements, each requiring its gradient."""
    inputs, _ = CASES[name]
    shape = (max(1, n // CHANNELS), CHANNELS)
    made = []
    for input_name in inputs:
        if name == "swish_beta" and input_name == "beta":
            t = torch.rand(CHANNELS, device=device) + 0.5
        elif name == "screened_lj":
            t = torch.rand(shape, device=device) + 0.8
        else:
            t = torch.randn(shape, device=device)
        made.append(t.to(dtype).requires_grad_())
    return made


def _step(function: Callable[..., torch.Tensor], args: list[torch.Tensor]) -> None:
    """One fwd+bwd."""
    y = function(*args)
    torch.autograd.grad(y, args, torch.ones_like(y))


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(
    function: Callable[..., torch.Tensor], args: list[torch.Tensor], device: str, repeat: int
) -> tuple[float, float, int]:
    """(first call's seconds, steady-state median seconds, peak bytes) of fwd+bwd."""
    _sync(device)
    start = time.perf_counter()
    _step(function, args)
    _sync(device)
    first = time.perf_counter() - start
    for _ in range(2):
        _step(function, args)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        _step(function, args)
        _sync(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else 0
    return first, sorted(times)[len(times) // 2], peak


def _copy_bandwidth(n: int, dtype: torch.dtype, device: str, repeat: int) -> float:
    """Bytes read and written per second by `torch.empty_like(x).copy_(x)`."""
    x = torch.randn(n, device=device).to(dtype)
    y = torch.empty_like(x)
    y.copy_(x)
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeat):
        y.copy_(x)
    _sync(device)
    return 2 * x.numel() * x.element_size() * repeat / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    """Measure every case and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU, once")
    parser.add_argument("--sizes", type=float, nargs="*", default=[1e6, 1e7, 1e8])
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    arguments = parser.parse_args(argv)
    device = "cpu" if arguments.dry_run else "cuda"
    sizes = [3000] if arguments.dry_run else [int(s) for s in arguments.sizes]
    repeat = 1 if arguments.dry_run else 20
    gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run)"
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        bandwidth = _copy_bandwidth(max(sizes), dtype, device, repeat)
        for name in arguments.cases:
            module = _module(name)
            fused, eager = getattr(module, f"bench_{name}"), EAGER[name]
            # dynamic: one compile per case and dtype, not one per size
            compiled = eager if arguments.dry_run else torch.compile(eager, dynamic=True)
            for n in sizes:
                args = _inputs(name, n, dtype, device)
                row: dict[str, Any] = {
                    "case": name,
                    "dtype": str(dtype).removeprefix("torch."),
                    "elements": args[0].numel(),
                }
                for label, function in (("eager", eager), ("compile", compiled), ("fused", fused)):
                    first, steady, peak = _time(function, args, device, repeat)
                    row |= {
                        f"{label}_ms": steady * 1e3,
                        f"{label}_first_ms": first * 1e3,
                        f"{label}_peak_mb": peak / 2**20,
                    }
                moved = (
                    sum(a.numel() * a.element_size() for a in args) * 4
                )  # x read twice, y, saved, grads
                row["fused_bandwidth_pct"] = 100 * moved / row["fused_ms"] * 1e3 / bandwidth
                row["copy_gb_s"] = bandwidth / 1e9
                rows.append(row)
                print(row, flush=True)
                _write(rows, arguments.out, gpu)  # each row as it comes: a run cut short keeps it


def _write(rows: list[dict[str, Any]], out: Path, gpu: str) -> None:
    """The table so far, as csv and markdown."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "triton_gpu.csv", "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    columns = list(rows[0])
    lines = [
        f"GPU: {gpu}; torch {torch.__version__}",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + " --- |" * len(columns),
    ]
    lines += [
        "| "
        + " | ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in columns)
        + " |"
        for r in rows
    ]
    (out / "triton_gpu.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
