"""The command line of `python -m bench`: parse options, run, write the markdown report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from bench.calibrate import CALIBRATION_SIZE, TABLE, calibrate, write_table
from bench.cases import CASES, Case, select_cases
from bench.chart import write_chart
from bench.machine import describe
from bench.measure import reuse_freed_heap
from bench.primitives import time_primitives
from bench.report import Header, render_report
from bench.runner import CPP_COLUMNS, Results, Settings, run_cases
from bench.scaling import ScalingRow, run_scaling

DEFAULT_SIZES = {"cpu": "1e6,1e7", "cuda": "1e7,1e8"}
QUICK_SIZE = "4096"
QUICK_ELEMENTS = 4096
# The committed results, written only with --save; other runs go to the ignored build/.
RESULTS = Path("bench/results")
SCRATCH = Path("build/bench")
SCALING_OPS = "10,30,100,300,1000"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite as the options say and write the report; 0 on success, 2 on bad usage."""
    args = _parser().parse_args(argv)
    if args.save and (args.quick or args.output):
        print(
            "error: --save writes the full results; it takes no --quick or --output",
            file=sys.stderr,
        )
        return 2
    _apply_quick(args)
    if args.calibrate:
        return _calibrate(args, argv)
    try:
        device, cases = _check(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    heap = _heap(args.allocator, device)
    results = _run(args, device, cases)
    text = render_report(_header(args, device, heap, argv), results, device.type == "cuda")
    output = _output_path(args, device)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"bench: wrote {output}", file=sys.stderr)
    chart = output.with_suffix(".png")
    if write_chart(results, chart):
        print(f"bench: wrote {chart}", file=sys.stderr)
    return 0


def _calibrate(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """--calibrate: time the primitives on CPU and write symgrad's cost table."""
    torch.set_num_threads(args.threads)
    _heap(args.allocator, torch.device("cpu"))  # the heap the cases run with
    words = sys.argv[1:] if argv is None else list(argv)
    elements = QUICK_ELEMENTS if args.quick else CALIBRATION_SIZE
    table = calibrate(elements, args.repeats, args.threads, " ".join(["python -m bench", *words]))
    output = Path(args.output) if args.output else TABLE
    write_table(table, output)
    for name, value in sorted(table.relative.items(), key=lambda item: item[1]):
        print(f"{name:24s} {value:7.2f}")
    print(f"bench: wrote {output}", file=sys.stderr)
    return 0


def _output_path(args: argparse.Namespace, device: torch.device) -> Path:
    """Where the report goes: --output, the committed results with --save, else build/."""
    if args.output:
        return Path(args.output)
    folder = RESULTS if args.save else SCRATCH
    return folder / f"{device.type}.md"


def _check(args: argparse.Namespace) -> tuple[torch.device, tuple[Case, ...]]:
    """The device and the cases the options name; ValueError when they cannot be had."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but torch sees no CUDA device")
    return device, select_cases(_names(args.cases))


def _run(args: argparse.Namespace, device: torch.device, cases: tuple[Case, ...]) -> Results:
    """Run the cases, then the scaling run and primitive costs."""
    torch.set_num_threads(args.threads)
    settings = Settings(
        device,
        _ints(args.sizes),
        args.repeats,
        args.warmup,
        not args.no_compile,
        _cpp(args.cpp),
        getattr(torch, args.dtype),
    )
    results = run_cases(cases, settings)
    results.scaling = _scaling(args)
    if not args.no_primitives:
        results.primitive_elements = max(settings.sizes)
        results.primitives = time_primitives(max(settings.sizes), settings.repeats, device)
    return results


def _parser() -> argparse.ArgumentParser:
    """The options, with what each does."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    add = parser.add_argument
    add("--device", choices=["cpu", "cuda"], default="cpu", help="where to run (default cpu)")
    add("--sizes", help="elements per input, comma-separated (default 1e6,1e7; cuda 1e7,1e8)")
    add("--repeats", type=int, help="timed rounds per size (default 25)")
    add("--warmup", type=int, help="untimed rounds first, compiling included (default 3)")
    add(
        "--cases",
        help=f"comma-separated, or 'none' (default all: {','.join(c.name for c in CASES)})",
    )
    add(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default="float32",
        help="the floating inputs' dtype (default float32)",
    )
    add("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    add(
        "--output",
        help=f"markdown file to write (default {SCRATCH}/<device>.md; {RESULTS}/ with --save)",
    )
    add(
        "--save",
        action="store_true",
        help=f"write the committed results, {RESULTS}/<device>.md (not with --quick)",
    )
    add("--quick", action="store_true", help="smoke run: tiny size, 2 repeats, no torch.compile")
    add("--no-compile", action="store_true", help="leave out torch.compile (compile and fused)")
    add(
        "--cpp",
        nargs="?",
        const="all",
        choices=["all", "fused"],
        help="also build and time the C++ target: both columns (cpp, cpp_fused), or "
        "--cpp fused for cpp_fused alone",
    )
    add(
        "--allocator",
        choices=["default", "reuse"],
        default="default",
        help="CPU heap: glibc's defaults as in a user's process (default), or freed memory "
        "kept for reuse, no fresh page faults (see report)",
    )
    add("--no-primitives", action="store_true", help="leave out the single-primitive costs")
    add(
        "--calibrate",
        action="store_true",
        help=f"only time the primitives (1e6 elements, CPU) and write symgrad's cost table, "
        f"{TABLE} (or --output)",
    )
    add("--scaling", action="store_true", help="also run the codegen-scaling run")
    add("--scaling-ops", help=f"formula sizes of the scaling run (default {SCALING_OPS})")
    add("--scaling-seeds", type=int, help="random formulas per size (default 3)")
    add("--scaling-timeout", type=float, default=120.0, help="seconds per formula (default 120)")
    return parser


def _apply_quick(args: argparse.Namespace) -> None:
    """Fill in the defaults, the smaller ones of --quick where it is given."""
    quick = args.quick
    args.sizes = args.sizes or (QUICK_SIZE if quick else DEFAULT_SIZES[args.device])
    args.repeats = args.repeats or (2 if quick else 25)
    args.warmup = args.warmup if args.warmup is not None else (1 if quick else 3)
    args.no_compile = args.no_compile or quick
    args.no_primitives = args.no_primitives or quick
    args.scaling_ops = args.scaling_ops or ("10,30" if quick else SCALING_OPS)
    args.scaling_seeds = args.scaling_seeds or (1 if quick else 3)


def _heap(mode: str, device: torch.device) -> str:
    """Set up the CPU heap as --allocator asks; what it ended up as, for the report."""
    if device.type != "cpu":
        return "not used (CUDA)"
    if mode == "reuse" and reuse_freed_heap():
        return "freed memory kept for reuse (--allocator reuse: mallopt, no mmap, no trimming)"
    return "glibc's defaults, as in a user's process (--allocator default)"


def _cpp(choice: str | None) -> tuple[str, ...]:
    """The C++ columns --cpp asks for."""
    return {None: (), "all": CPP_COLUMNS, "fused": ("cpp_fused",)}[choice]


def _ints(text: str) -> tuple[int, ...]:
    """'1e6,1e7' -> (1000000, 10000000)."""
    return tuple(int(float(item)) for item in text.split(",") if item.strip())


def _names(text: str | None) -> tuple[str, ...] | None:
    """Case names from --cases: None for all, () for 'none'."""
    if text is None:
        return None
    if text.strip() == "none":
        return ()
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _scaling(args: argparse.Namespace) -> list[ScalingRow]:
    """The codegen-scaling rows, when --scaling asks for them."""
    if not args.scaling:
        return []
    print("bench: codegen scaling", file=sys.stderr, flush=True)
    return run_scaling(_ints(args.scaling_ops), args.scaling_seeds, args.scaling_timeout)


def _header(
    args: argparse.Namespace, device: torch.device, heap: str, argv: Sequence[str] | None
) -> Header:
    """The report's title, machine, command and settings lines."""
    words = sys.argv[1:] if argv is None else list(argv)
    settings = (
        f"{args.dtype}, {args.repeats} timed rounds after {args.warmup} warm-up rounds, "
        f"CPU heap: {heap}"
    )
    return Header(
        title=f"symgrad benchmark: {device.type}",
        machine=describe(device, args.threads),
        command=" ".join(["python -m bench", *words]),
        settings=settings,
    )
