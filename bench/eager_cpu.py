"""Generated Function against eager autograd of the same formula on the CPU, as a user runs it.

`python -m bench.eager_cpu [--save] [--allocator default|reuse] [--rounds N] [--cases a,b]`.
Each spec of bench/eager_specs/ (written from its definition, independently of the main
bench's cases) is generated, and one forward+backward step of it and of eager autograd of
the same formula in plain torch are timed at `[1000, 1000]` float32 on one thread, in
paired interleaved rounds: each round times both, in a rotating order, and the ratio is
taken within the round. The table gives the median of those ratios with their
interquartile range, the median milliseconds, and the bytes each saves for backward.
glibc's allocator is left as a user's process has it unless `--allocator reuse` asks for
freed memory to be kept (bench/measure.py, reuse_freed_heap). The results go to
bench/results/eager_cpu.md only with --save (else build/bench/eager_cpu.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.build import generate_case
from bench.machine import describe
from bench.measure import (
    make_step,
    measure_peak,
    measure_saved,
    reuse_freed_heap,
    time_interleaved,
)

Tensor = torch.Tensor
SPECS = Path(__file__).parent / "eager_specs"
RESULTS = Path("bench/results/eager_cpu.md")
SCRATCH = Path("build/bench/eager_cpu.md")
SHAPE = (1000, 1000)
TARGET = 1.0
ALLOCATORS = {
    "default": "glibc's defaults (mmap threshold and trimming as in a user's process)",
    "reuse": "freed memory kept for reuse (mallopt: no mmap, no trimming)",
}


def _layer_norm(x: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the last dimension, no affine, written out."""
    xc = x - x.mean(-1, keepdim=True)
    return xc / torch.sqrt((xc**2).mean(-1, keepdim=True) + eps)


def _mish(x: Tensor) -> Tensor:
    """Mish from its definition."""
    return x * torch.tanh(torch.nn.functional.softplus(x))


def _smooth_l1(x: Tensor, target: Tensor, beta: float = 1.0) -> Tensor:
    """Smooth-L1 loss averaged over every element, written out."""
    d = x - target
    a = d.abs()
    return torch.where(a < beta, 0.5 * d**2 / beta, a - 0.5 * beta).mean()


def _softplus_beta(x: Tensor, beta: float = 2.0) -> Tensor:
    """Softplus with a slope, from its definition."""
    return torch.log(1 + torch.exp(beta * x)) / beta


def _one(shape: tuple[int, ...]) -> tuple[Tensor, ...]:
    """One standard-normal input that needs its gradient."""
    return (torch.randn(shape).requires_grad_(),)


def _pair(shape: tuple[int, ...]) -> tuple[Tensor, ...]:
    """Predictions and a target without gradient, about 60% of the differences below 1."""
    return (torch.randn(shape).requires_grad_(), torch.randn(shape) * 0.3)


@dataclass(frozen=True)
class EagerCase:
    """A spec of bench/eager_specs/, its formula in plain torch and how to make its inputs."""

    name: str
    eager: Callable[..., Tensor]
    make_inputs: Callable[[tuple[int, ...]], tuple[Tensor, ...]]


CASES = (
    EagerCase("layer_norm", _layer_norm, _one),
    EagerCase("mish", _mish, _one),
    EagerCase("smooth_l1", _smooth_l1, _pair),
    EagerCase("softplus_beta", _softplus_beta, _one),
)


@dataclass(frozen=True)
class EagerRow:
    """One case: median milliseconds, the paired ratio with its spread, and saved bytes."""

    case: str
    eager_ms: float
    generated_ms: float
    ratio: float
    # Interquartile range of the paired ratios: (first quartile, third quartile).
    quartiles: tuple[float, float]
    eager_saved: int
    generated_saved: int
    # Of the generated Function's saved bytes, those of its own inputs (held by the caller).
    generated_saved_inputs: int = 0
    # Peak bytes of one fwd+bwd above the start (None where they cannot be seen).
    eager_peak: int | None = None
    generated_peak: int | None = None


def measure(case: EagerCase, workdir: Path, rounds: int) -> EagerRow:
    """Time the generated Function against eager autograd in paired rounds; saved bytes."""
    generated = generate_case(SPECS / f"{case.name}.yaml", workdir).function
    torch.manual_seed(0)
    inputs = case.make_inputs(SHAPE)
    grad = torch.ones_like(case.eager(*inputs))
    functions = {"eager": case.eager, "generated": generated}
    steps = {name: make_step(fn, inputs, grad) for name, fn in functions.items()}
    samples = time_interleaved(steps, rounds, warmup=3, device=torch.device("cpu"))
    ratios = [g / e for g, e in zip(samples["generated"], samples["eager"], strict=True)]
    low, _, high = statistics.quantiles(ratios, n=4)
    saved = {name: measure_saved(fn, inputs).nbytes for name, fn in functions.items()}
    peak = {name: measure_peak(step, torch.device("cpu")) for name, step in steps.items()}
    return EagerRow(
        case.name,
        1e3 * statistics.median(samples["eager"]),
        1e3 * statistics.median(samples["generated"]),
        statistics.median(ratios),
        (low, high),
        saved["eager"],
        saved["generated"],
        _input_bytes(generated, inputs),
        peak["eager"],
        peak["generated"],
    )


def _input_bytes(fn: Callable[..., Tensor], inputs: tuple[Tensor, ...]) -> int:
    """Bytes of the inputs' storages among what one forward of `fn` saves for backward."""
    own = {t.untyped_storage().data_ptr() for t in inputs}
    packed: dict[int, int] = {}

    def pack(tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() in own:
            packed[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*inputs)
    return sum(packed.values())


def render(rows: Sequence[EagerRow], allocator: str, command: str) -> str:
    """The markdown table, with the machine, the allocator and the command."""
    lines = [
        "# Generated Function against eager autograd on the CPU: fwd+bwd, float32, one thread",
        "",
        f"Machine: {describe(torch.device('cpu'), 1)}. Command: `{command}`.",
        f"Allocator: {ALLOCATORS[allocator]}.",
        "",
        f"Inputs `{list(SHAPE)}`. Median milliseconds per step; the ratio is the median over",
        "paired interleaved rounds of the generated time over eager's in the same round, with",
        f"the interquartile range of those ratios. Target: at most {TARGET}x, and no more bytes",
        "saved for backward than eager autograd (saved-tensor hooks, storages deduplicated;",
        "in brackets, the share of the generated Function's that are its own inputs, which the",
        "caller holds anyway). Peak: bytes allocated during one fwd+bwd above the start.",
        "",
        "| case | eager ms | generated ms | ratio (IQR) | eager saved MB | generated saved MB"
        " | eager peak MB | generated peak MB |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    lines += [_row(row) for row in rows]
    over = [row.case for row in rows if not _meets(row)]
    lines += ["", f"Above target: {', '.join(over) if over else 'none'}.", ""]
    return "\n".join(lines)


def _meets(row: EagerRow) -> bool:
    """Whether a row meets both targets."""
    return row.ratio <= TARGET and row.generated_saved <= row.eager_saved


def _row(row: EagerRow) -> str:
    """One table line."""
    low, high = row.quartiles
    cells = [
        row.case,
        f"{row.eager_ms:.2f}",
        f"{row.generated_ms:.2f}",
        f"{row.ratio:.2f}x ({low:.2f}-{high:.2f})",
        f"{row.eager_saved / 1e6:.3f}",
        f"{row.generated_saved / 1e6:.3f} ({row.generated_saved_inputs / 1e6:.3f} inputs)",
        _megabytes(row.eager_peak),
        _megabytes(row.generated_peak),
    ]
    return "| " + " | ".join(cells) + " |"


def _megabytes(size: int | None) -> str:
    """Bytes as megabytes, or a dash where they were not measured."""
    return "-" if size is None else f"{size / 1e6:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the table and write it; 0 on success."""
    parser = argparse.ArgumentParser(prog="python -m bench.eager_cpu", description=__doc__)
    parser.add_argument("--save", action="store_true", help=f"write {RESULTS}")
    parser.add_argument("--allocator", choices=list(ALLOCATORS), default="default")
    parser.add_argument("--rounds", type=int, default=41, help="paired rounds per case")
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.allocator == "reuse" and not reuse_freed_heap():
        print("bench.eager_cpu: glibc's mallopt is not available here", file=sys.stderr)
        return 2
    names = set(args.cases.split(",")) if args.cases else {case.name for case in CASES}
    rows: list[EagerRow] = []
    with tempfile.TemporaryDirectory() as workdir:
        for case in (case for case in CASES if case.name in names):
            rows.append(measure(case, Path(workdir), args.rounds))
            print(_row(rows[-1]), file=sys.stderr)
    command = "python -m bench.eager_cpu " + " ".join(argv if argv is not None else sys.argv[1:])
    output = RESULTS if args.save else SCRATCH
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(rows, args.allocator, command.strip()), encoding="utf-8")
    print(f"bench.eager_cpu: wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
