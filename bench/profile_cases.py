"""Where a case's forward+backward spends its time: eager autograd against the generated Function.

`python -m bench.profile_cases --cases swish_beta,layer_norm --device cuda [--dtype bfloat16]
[--elements 1e7] [--out DIR]` runs each case's step (bench.measure.make_step) under
torch.profiler, after a warm-up, and writes one table per case and alternative: the
kernels (on CUDA) or the operators (on CPU) by total time, with their call counts. It
explains a ratio of the main table; it is not itself a benchmark (the profiler adds its
own cost to every call).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from bench.build import generate_case
from bench.cases import Case, select_cases
from bench.measure import Step, make_step
from bench.runner import _inputs

STEPS = 5
ROWS = 15


def profile_step(step: Step, device: torch.device) -> str:
    """The profiler's table of `STEPS` runs of `step`, by total device (or CPU) time."""
    for _ in range(3):
        step()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(STEPS):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table: str = prof.key_averages().table(sort_by=key, row_limit=ROWS)
    return table


def profile_case(case: Case, elements: int, device: torch.device, dtype: torch.dtype) -> str:
    """Markdown: the case's eager and generated profiles, one code block each."""
    with tempfile.TemporaryDirectory() as workdir:
        generated = generate_case(case.spec_path, Path(workdir)).function
        inputs, grad = _inputs(case, elements, device, dtype)
        parts = [f"## {case.name}, {elements:,} elements, {dtype}, {STEPS} steps", ""]
        for label, fn in (("eager", case.reference), ("generated", generated)):

            def bound(*tensors: torch.Tensor, fn: object = fn) -> torch.Tensor:
                return fn(*tensors, **case.numbers)  # type: ignore[operator, no-any-return]

            table = profile_step(make_step(bound, inputs, grad), device)
            parts += [f"### {label}", "", "```", table, "```", ""]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Profile the cases named and write (or print) the tables; 0 on success."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile_cases", description=__doc__)
    parser.add_argument("--cases", required=True, help="comma-separated case names")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--elements", type=float, default=1e7)
    parser.add_argument("--out", type=Path, help="write DIR/profile_<device>.md")
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    names = tuple(name for name in args.cases.split(",") if name)
    text = "\n".join(
        profile_case(case, int(args.elements), device, dtype) for case in select_cases(names)
    )
    if args.out is None:
        print(text)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    output = args.out / f"profile_{args.device}_{args.dtype}.md"
    output.write_text(text, encoding="utf-8")
    print(f"bench.profile_cases: wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
