"""The Triton kernels of `mode: fused` against eager autograd and torch.compile, on a GPU.

`python -m bench.triton_gpu --out DIR` writes DIR/triton_gpu.md and .csv: fwd+bwd time of
each case (eager autograd of the formula written in plain torch, torch.compile of it, the
generated fused Function, and torch's built-in kernels where it has them) at
1e6, 1e7 and 1e8 elements in float32 and bfloat16, the bandwidth of the fused run against
the copy bandwidth measured in the same run, the first call's cost and peak memory,
and whether the fused function ran the kernels (`fused_kernels`).
Each is also timed by phase: forward alone, backward alone, and the host's
time to issue fwd+bwd (`_host_ms`: until the calls return, before synchronising).
`--dry-run` runs every step once at a tiny size on the CPU (Triton's interpreter where
TRITON_INTERPRET=1 and SYMGRAD_TRITON_CPU=1 are set), to check the script itself.
`--host` prints the host time per fwd+bwd of each path on the CPU with the kernels'
launches stubbed out (same variables set), without running a kernel.
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
from bench import cases

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
# Each case's formula as a user writes it in plain torch: what eager autograd and
# torch.compile run (the issue's "eager autograd"; bench.cases' literal formulas).
EAGER: dict[str, Callable[..., torch.Tensor]] = {
    "silu": cases.silu,
    "gelu_erf": cases.gelu_erf,
    "gelu_tanh": cases.gelu_tanh,
    "mish": cases.mish,
    "softplus": cases.softplus,
    "swish_beta": cases.swish_beta,
    "geglu_half": lambda value, gate: value * cases.gelu_erf(gate),
    "swiglu_half": lambda value, gate: value * cases.silu(gate),
    "huber_mean": lambda x, t: torch.mean(
        torch.where((x - t).abs() < 1, 0.5 * (x - t) ** 2, (x - t).abs() - 0.5)
    ),
    "screened_lj": lambda r: 4 * (r**-12 - r**-6) * torch.exp(-0.5 * r),
}
# torch's own kernels of the case, where it has them: eager autograd of one op each way.
BUILTIN: dict[str, Callable[..., torch.Tensor]] = {
    "silu": nnf.silu,
    "gelu_erf": nnf.gelu,
    "gelu_tanh": lambda x: nnf.gelu(x, approximate="tanh"),
    "mish": nnf.mish,
    "softplus": nnf.softplus,
    "geglu_half": lambda value, gate: value * nnf.gelu(gate),
    "swiglu_half": lambda value, gate: value * nnf.silu(gate),
    "huber_mean": lambda x, t: nnf.huber_loss(x, t),
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


def _phases(
    function: Callable[..., torch.Tensor], args: list[torch.Tensor], device: str, repeat: int
) -> dict[str, float]:
    """Median seconds of the forward alone, the backward alone, and the host time of
    fwd+bwd (until the calls return, before synchronising: the launches' Python cost
    where the GPU keeps up)."""
    forward, backward, host = [], [], []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        y = function(*args)
        _sync(device)
        middle = time.perf_counter()
        torch.autograd.grad(y, args, torch.ones_like(y))
        _sync(device)
        forward.append(middle - start)
        backward.append(time.perf_counter() - middle)
        start = time.perf_counter()
        _step(function, args)
        host.append(time.perf_counter() - start)
    _sync(device)
    return {
        name: sorted(times)[len(times) // 2]
        for name, times in (("forward", forward), ("backward", backward), ("host", host))
    }


def host_overhead(name: str, repeat: int) -> dict[str, float]:
    """Microseconds of host time per fwd+bwd on small CPU tensors with the kernels'
    launches replaced by no-ops: the Function without kernels, the operator path
    (triton_op and its registered autograd, as torch.compile sees it) and the eager
    kernels' Function (Note [eager kernels]). Needs TRITON_INTERPRET=1 and
    SYMGRAD_TRITON_CPU=1 (the kernels' CPU opt-in); no kernel runs."""
    module = _module(name)
    stub = _NoLaunch()
    for kernel in ("forward", "backward"):
        setattr(module, f"_bench_{name}_{kernel}_kernel", stub)
    args = _inputs(name, 16, torch.float32, "cpu")
    operator = getattr(module, f"_bench_{name}_triton_forward")
    paths = {
        "function": getattr(module, f"_plain_bench_{name}"),
        "operator": lambda *a: operator(*a)[0],
        "eager kernels": getattr(module, f"bench_{name}"),
    }
    wrap, torch.library.wrap_triton = torch.library.wrap_triton, lambda kernel: kernel
    try:
        result = {}
        for label, function in paths.items():
            for _ in range(20):
                _step(function, args)
            start = time.perf_counter()
            for _ in range(repeat):
                _step(function, args)
            result[label] = (time.perf_counter() - start) / repeat * 1e6
    finally:
        torch.library.wrap_triton = wrap
    return result


class _NoLaunch:
    """A kernel whose launch does nothing: `kernel[grid](...)`."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None


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
    parser.add_argument(
        "--host", action="store_true", help="host µs per fwd+bwd, launches stubbed, CPU"
    )
    arguments = parser.parse_args(argv)
    if arguments.host:
        for name in arguments.cases:
            times = host_overhead(name, 200)
            print(name, " ".join(f"{k}: {v:.0f} µs" for k, v in times.items()), flush=True)
        return
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
                # `operator`: the kernels through triton_op and its registered autograd,
                # the path torch.compile sees (and eager's before the eager Function).
                operator = getattr(module, f"_bench_{name}_triton_forward", None)
                paths = [("eager", eager), ("compile", compiled), ("fused", fused)]
                if name in BUILTIN:
                    paths.append(("builtin", BUILTIN[name]))
                if operator is not None:
                    paths.append(("operator", lambda *a, op=operator: op(*a)[0]))
                for label, function in paths:
                    first, steady, peak = _time(function, args, device, repeat)
                    row |= {
                        f"{label}_ms": steady * 1e3,
                        f"{label}_first_ms": first * 1e3,
                        f"{label}_peak_mb": peak / 2**20,
                    }
                    # Where the time goes: forward, backward, and the host's share.
                    phases = _phases(function, args, device, repeat)
                    row |= {f"{label}_{phase}_ms": t * 1e3 for phase, t in phases.items()}
                # Whether the fused function ran the Triton kernels (huber_mean, a loss,
                # does since they sum over every element), not the Function's fallback.
                y = fused(*args)
                row["fused_kernels"] = type(y.grad_fn).__name__ == "_CaseTritonBackward"
                # The least a fwd+bwd moves: inputs read twice (forward, backward), the
                # output written and its gradient read (one value for a loss), each
                # input's gradient written.
                inputs = sum(a.numel() * a.element_size() for a in args)
                output = y.numel() * y.element_size()
                moved = 2 * inputs + 2 * output + inputs
                row["fused_bandwidth_pct"] = 100 * moved / row["fused_ms"] * 1e3 / bandwidth
                row["copy_gb_s"] = bandwidth / 1e9
                rows.append(row)
                print(row, flush=True)
                _write(rows, arguments.out, gpu)  # each row as it comes: a run cut short keeps it


def _write(rows: list[dict[str, Any]], out: Path, gpu: str) -> None:
    """The table so far, as csv and markdown."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "triton_gpu.csv", "w", newline="") as stream:
        # Every row's columns, in order (a case without kernels has no `operator`).
        columns = list(dict.fromkeys(c for r in rows for c in r))
        writer = csv.DictWriter(stream, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        f"GPU: {gpu}; torch {torch.__version__}",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + " --- |" * len(columns),
    ]
    lines += [
        "| "
        + " | ".join(
            f"{r[c]:.3g}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in columns
        )
        + " |"
        for r in rows
    ]
    (out / "triton_gpu.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
