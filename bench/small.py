"""Per-call cost at small sizes: generated Function against a minimal hand-written one.

`python -m bench.small [--save] [--rounds N] [--cases a,b]`. For every bench case, at `[64]`
and `[512, 64]` float32 on one thread, one forward+backward step of the generated Function,
of the hand-written Function of bench/handwritten.py and of torch's built-in (where it has
one) are timed in paired interleaved rounds: each round times a batch of steps of each, in
a rotating order, and the ratio to the hand-written one is taken within the round; the
table gives the median step in microseconds and the median of the paired ratios. The
results go to bench/results/small.md only with --save (else build/bench/small.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.build import generate_case
from bench.cases import Case, select_cases
from bench.handwritten import HANDWRITTEN
from bench.machine import describe
from bench.measure import Step, make_step

SHAPES: tuple[tuple[int, ...], ...] = ((64,), (512, 64))
TARGET = 1.1
RESULTS = Path("bench/results/small.md")
SCRATCH = Path("build/bench/small.md")
# Inputs of each case beyond x: "channel" is a per-channel parameter of shape [C] drawn
# from a range, "target" a full-shape input without gradient (0/1 for the focal loss).
_EXTRA: dict[str, tuple[tuple[str, float, float], ...]] = {
    "swish_beta": (("channel", 0.5, 2.0),),
    "huber": (("target", -1.0, 1.0),),
    "rms_norm": (("channel", 0.5, 1.5),),
    "layer_norm": (("channel", 0.5, 1.5), ("channel", -0.1, 0.1)),
    "geglu": (("full", -2.0, 2.0),),
    "focal_loss": (("binary", 0.0, 1.0),),
    "screened_lj": (("full", -1.0, 1.0), ("full", 0.9, 1.1)),
}
# The first input's range where a standard normal would leave the case's domain.
_FIRST: dict[str, tuple[float, float]] = {"screened_lj": (0.8, 3.0)}
_BUILTIN_BY_ROW: dict[str, Callable[..., torch.Tensor]] = {
    # torch's built-in averaged over the last dim, as the spec is (F.huber_loss's mean is
    # over every element).
    "huber": lambda x, target, delta=1.0: torch.nn.functional.huber_loss(
        x, target, reduction="none", delta=delta
    ).mean(-1),
}


@dataclass(frozen=True)
class SmallRow:
    """One case at one shape: median microseconds per step and paired ratios."""

    case: str
    shape: tuple[int, ...]
    # Median microseconds of one step of each alternative timed.
    micros: dict[str, float]
    # Median over rounds of the alternative's time over the hand-written one's.
    ratios: dict[str, float]


def small_inputs(
    case: Case, shape: tuple[int, ...], device: str = "cpu"
) -> tuple[torch.Tensor, ...]:
    """The case's float32 inputs for a leading input of `shape` (seeded), on `device`."""
    torch.manual_seed(0)
    low, high = _FIRST.get(case.name, (-3.0, 3.0))
    first = torch.empty(shape).uniform_(low, high)
    extra = [_extra(kind, lo, hi, shape) for kind, lo, hi in _EXTRA.get(case.name, ())]
    return tuple(
        t.to(device).requires_grad_(t.requires_grad) for t in (first.requires_grad_(), *extra)
    )


def _extra(kind: str, low: float, high: float, shape: tuple[int, ...]) -> torch.Tensor:
    """One more input of the kind `_EXTRA` names."""
    if kind == "channel":
        return torch.empty(shape[-1:]).uniform_(low, high).requires_grad_()
    if kind == "binary":
        return (torch.rand(shape) < 0.25).float()
    value = torch.empty(shape).uniform_(low, high)
    return value if kind == "target" else value.requires_grad_()


def alternatives(case: Case, workdir: Path) -> dict[str, Callable[..., torch.Tensor]]:
    """generated, hand-written and (where torch has one) builtin, each bound to the numbers."""
    found = {
        "generated": generate_case(case.spec_path, workdir).function,
        "handwritten": HANDWRITTEN[case.name],
    }
    builtin = _BUILTIN_BY_ROW.get(case.name, case.builtin)
    if builtin is not None:
        found["builtin"] = builtin
    return {name: _bound(fn, case) for name, fn in found.items()}


def _bound(fn: Callable[..., torch.Tensor], case: Case) -> Callable[..., torch.Tensor]:
    """`fn` with the case's numbers passed by keyword."""
    numbers = dict(case.numbers)
    return lambda *tensors: fn(*tensors, **numbers)


def paired_rounds(
    steps: dict[str, Step], rounds: int, batch: int, device: str = "cpu"
) -> dict[str, list[float]]:
    """Seconds per step of each, per round: a batch of each, rotating which goes first.

    On CUDA the batch ends with a synchronize, so queued kernels are part of its time.
    """
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    names = list(steps)
    for name in names:
        for _ in range(batch):
            steps[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for n in range(rounds):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            step = steps[name]
            start = time.perf_counter()
            for _ in range(batch):
                step()
            sync()
            samples[name].append((time.perf_counter() - start) / batch)
    return samples


def measure_case(
    case: Case, workdir: Path, rounds: int, batch: int, device: str = "cpu"
) -> list[SmallRow]:
    """The case's rows, one per shape of SHAPES."""
    functions = alternatives(case, workdir)
    rows = []
    for shape in SHAPES:
        inputs = small_inputs(case, shape, device)
        grad = torch.ones_like(functions["handwritten"](*inputs))
        steps = {name: make_step(fn, inputs, grad) for name, fn in functions.items()}
        samples = paired_rounds(steps, rounds, batch, device)
        base = samples["handwritten"]
        micros = {name: 1e6 * statistics.median(times) for name, times in samples.items()}
        ratios = {
            name: statistics.median(t / b for t, b in zip(times, base, strict=True))
            for name, times in samples.items()
            if name != "handwritten"
        }
        rows.append(SmallRow(case.name, shape, micros, ratios))
    return rows


def render(rows: Sequence[SmallRow], command: str, device: str = "cpu") -> str:
    """The markdown table, with the machine and the command that produced it."""
    lines = [
        f"# Per-call cost at small sizes: forward+backward, float32, one thread, {device}",
        "",
        f"Machine: {describe(torch.device(device), 1)}. Command: `{command}`.",
        "",
        "Median microseconds per step; in brackets the median over paired interleaved rounds",
        "of the time over the hand-written Function's (bench/handwritten.py). Target:",
        f"generated at most {TARGET}x the hand-written on every row.",
        "",
        "| case | shape | hand-written µs | generated µs | builtin µs | target |",
        "|---|---|---:|---:|---:|---|",
    ]
    lines += [_row(row) for row in rows]
    over = [f"{row.case} {list(row.shape)}" for row in rows if row.ratios["generated"] > TARGET]
    lines += ["", f"Above {TARGET}x: {', '.join(over) if over else 'none'}.", ""]
    return "\n".join(lines)


def _row(row: SmallRow) -> str:
    """One table line."""
    gen = row.ratios["generated"]
    builtin = "-"
    if "builtin" in row.micros:
        builtin = f"{row.micros['builtin']:.1f} ({row.ratios['builtin']:.2f}x)"
    verdict = "ok" if gen <= TARGET else "ABOVE"
    hand = f"{row.micros['handwritten']:.1f}"
    cells = [row.case, str(list(row.shape)), hand, f"{row.micros['generated']:.1f} ({gen:.2f}x)"]
    return "| " + " | ".join([*cells, builtin, verdict]) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the small-size table and write it; 0 on success."""
    parser = argparse.ArgumentParser(prog="python -m bench.small", description=__doc__)
    parser.add_argument("--save", action="store_true", help=f"write {RESULTS}")
    parser.add_argument("--rounds", type=int, default=41, help="paired rounds per row")
    parser.add_argument("--batch", type=int, default=50, help="steps per timed batch")
    parser.add_argument("--cases", default=None, help="comma-separated case names")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--output", help=f"where to write (default {SCRATCH})")
    args = parser.parse_args(argv)
    if args.save and args.output:
        parser.error("--save writes the committed table; it takes no --output")
    torch.set_num_threads(1)
    names = tuple(args.cases.split(",")) if args.cases else None
    rows: list[SmallRow] = []
    with tempfile.TemporaryDirectory() as workdir:
        for case in select_cases(names):
            rows += measure_case(case, Path(workdir), args.rounds, args.batch, args.device)
            print(_row(rows[-2]) + "\n" + _row(rows[-1]), file=sys.stderr)
    command = "python -m bench.small " + " ".join(argv if argv is not None else sys.argv[1:])
    output = RESULTS if args.save else Path(args.output or SCRATCH)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(rows, command.strip(), args.device), encoding="utf-8")
    print(f"bench.small: wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
