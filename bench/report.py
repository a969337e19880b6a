"""Render a run's results as the markdown file in bench/results/."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bench.primitives import PrimitiveCost
from bench.runner import ALTERNATIVES, CPP_COLUMNS, OneOff, Results, Row
from bench.scaling import ScalingRow

# The targets, checked in the "Targets" section.
MEDIAN_TARGET = 0.8
TIME_HEADER = "## Time: forward+backward, median ms (paired ratio to eager autograd)"
SAVED_HEADER = "## Saved for backward: MB (distinct storages)"
PEAK_HEADER = "## Peak memory during forward+backward: MB above the start"
CODE_HEADER = "## Generated code"
ONE_OFF_HEADER = "## One-off costs: seconds"
SCALING_HEADER = "## Codegen scaling: random formulas"

DEFINITIONS = """\
## Definitions

- **eager**: autograd of the formula written with plain torch ops (`bench/cases.py`), the
  baseline of every ratio. **generated**: symgrad's Function, generated from
  `bench/specs/<case>.yaml` at run time, called eagerly. **fused**: symgrad's fused mode
  where it has one; until then a placeholder, torch.compile of the generated function's call
  (`bench/build.py`, Note [fused hook]). **compile**: torch.compile of the plain formula.
  **builtin**: torch's own function, where it has one. **cpp**: the C++ target's Function
  (`symgrad gen --target cpp`, ATen operations), built at run time; only with `--cpp`.
  **cpp_fused**: the same in fused mode (`mode: fused`): on CPU, forward and backward
  each one vectorised loop over the data; only with `--cpp`, for elementwise cases.
- **Ratios** of times are paired: the median over rounds of an alternative's time over
  eager's (or torch.compile's) in the same round, so that load from other processes,
  which changes between rounds, cancels. **noise** is the largest interquartile range
  of an alternative's timings over its median.
- **Time**: one step is `out = f(*inputs)` and `torch.autograd.grad(out, inputs, grad_out)`
  in the settings' dtype on pre-allocated inputs; after the warm-up (which also compiles), the
  alternatives are timed round-robin in a rotating order, and the median is reported. CPU
  time is wall clock; CUDA time is CUDA events around the step. On CPU, glibc's allocator
  is left as a user's process has it (`--allocator default`, the default): large
  temporaries are mapped afresh and pay their page faults. `--allocator reuse` tells glibc
  to keep freed memory for reuse instead (no mmap, no trimming), the steady state the CUDA
  caching allocator gives; the settings line says which was used.
- **Saved**: the storages autograd packs for backward during one forward, seen through
  `torch.autograd.graph.saved_tensors_hooks`, deduplicated by storage, their bytes summed;
  inputs and outputs count (in a network, saving a layer's input keeps it alive).
- **Peak**: the most memory allocated during one step above what was allocated at its
  start, returned gradients included. CUDA: `torch.cuda.max_memory_allocated` after a
  reset, minus `torch.cuda.memory_allocated` before. CPU: the running sum of allocations
  and frees recorded by `torch.profiler` with `profile_memory=True`.
- **GB/s** (CUDA): bytes an ideal fused forward+backward must move, divided by the median
  time. The ideal forward reads every tensor input once and writes the output; the ideal
  backward reads the inputs again and the output's gradient and writes each input's
  gradient. **copy** is a device-to-device copy of the same number of float32 elements
  (read once, written once), the bandwidth limit.
- **err**: largest difference from eager autograd's output and gradients, relative to
  the largest magnitude of each; a check that all alternatives compute the same thing.
- **Ops** (`bench/opcount.py`): tensor operations in the generated source's forward and in
  its whole backward (all `needs_input_grad` branches): `torch.*` calls, tensor method
  calls and arithmetic operators with a tensor operand.
- **Primitive costs** (`bench/primitives.py`): single torch ops on inputs of the largest
  size, timed the same way, relative to one elementwise multiplication: the prices a
  save-or-recompute policy weighs (skipped by `--quick` and `--no-primitives`).
- **kernels**: non-view aten operators one forward+backward dispatches, counted with a
  `TorchDispatchMode` (each is one pass over memory in eager mode).
- **gen s**: seconds of `symgrad.load_spec` plus `symgrad.generate` (parse, derive,
  render with black), in the benchmark's process.
- **One-off costs**, once per case and never in the step times. **cpp build**,
  **cpp_fused build**: the generated loader's first import in the benchmark's process,
  `torch.utils.cpp_extension.load` compiling, linking and loading the library. The cache
  is a temporary folder of the run, empty at its start; with `SYMGRAD_CPP_CACHE` set, that
  folder instead, where an earlier build makes this figure a load.
  **load (cached)**: the same loader imported again in a fresh Python process once the
  build is cached, timed from after `import torch`: ninja finds the build up to date, the
  library is loaded and its operator registered. **compile first call**: the compile
  column's first forward+backward at the first size, cold: dynamo reset and inductor's
  caches empty (`torch._inductor.utils.fresh_cache`: a new `TORCHINDUCTOR_CACHE_DIR`, its
  in-memory caches cleared), so tracing, AOTAutograd and inductor's code generation and
  compilation are all in it; torch.compile's once-per-process start-up (imports, compile
  workers) is paid before, on a throwaway formula, and not counted. A warm on-disk cache
  would hide most of it (for silu on a 2-core CPU: 3.7 s cold, 0.1 s warm).
"""


@dataclass(frozen=True)
class Header:
    """Where and how the results were taken."""

    title: str
    machine: str
    command: str
    settings: str


def render_report(header: Header, results: Results, cuda: bool) -> str:
    """The whole markdown file."""
    parts = [
        f"# {header.title}\n\nMachine: {header.machine}\n\n"
        f"Command: `{header.command}`\n\nSettings: {header.settings}\n",
    ]
    if results.rows:
        parts += [
            _time_table(results.rows),
            _memory_table(SAVED_HEADER, results.rows, _saved_cell),
            _memory_table(PEAK_HEADER, results.rows, _peak_cell),
        ]
        if cuda:
            parts.append(_bandwidth_table(results.rows))
        parts.append(_code_table(results.rows))
        if any(_measured(one_off) for one_off in results.one_off):
            parts.append(_one_off_table(results.one_off))
        parts.append(_targets(results.rows))
    if results.skipped:
        lines = [f"- {s.case}: unsupported by this symgrad: `{s.reason}`" for s in results.skipped]
        parts.append("## Skipped cases\n\n" + "\n".join(lines) + "\n")
    if results.primitives:
        parts.append(_primitive_table(results.primitives, results.primitive_elements))
    if results.scaling:
        parts.append(_scaling_table(results.scaling))
    parts.append(DEFINITIONS)
    return "\n".join(parts)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table, numbers right-aligned."""
    rule = ["---"] + ["--:"] * (len(headers) - 1)
    lines = [_line(headers), _line(rule), *(_line(row) for row in rows)]
    return "\n".join(lines) + "\n"


def _line(cells: Sequence[str]) -> str:
    """One markdown table line."""
    return "| " + " | ".join(cells) + " |"


def _columns(rows: Sequence[Row]) -> list[str]:
    """The alternatives that appear in any row, in the standard order."""
    return [name for name in ALTERNATIVES if any(name in row.measurements for row in rows)]


def _size(elements: int) -> str:
    """1e6-style size."""
    exponent = round(math.log10(elements)) if elements > 0 else 0
    return f"1e{exponent}" if 10**exponent == elements else str(elements)


def _ms(seconds: float) -> str:
    """Milliseconds with three significant digits."""
    return f"{seconds * 1e3:.3g}"


def _mb(nbytes: int | None) -> str:
    """Megabytes (1e6 bytes), one decimal."""
    return "n/a" if nbytes is None else f"{nbytes / 1e6:.1f}"


def _time_table(rows: Sequence[Row]) -> str:
    """Median ms and ratio to eager, one row per case and size."""
    columns = _columns(rows)
    body = []
    for row in rows:
        eager = row.measurements["eager"]
        cells = [row.case, _size(row.elements)]
        for name in columns:
            found = row.measurements.get(name)
            cells.append(
                "-" if found is None else f"{_ms(found.seconds)} ({found.ratio_to(eager):.2f}x)"
            )
        noise = max(found.spread for found in row.measurements.values())
        body.append([*cells, f"{noise:.0%}", _worst_error(row)])
    headers = ["case", "elements", *columns, "noise", "worst err"]
    return f"{TIME_HEADER}\n\n" + _table(headers, body)


def _worst_error(row: Row) -> str:
    """The largest deviation from eager autograd among the alternatives, and whose."""
    name, found = max(row.measurements.items(), key=lambda item: item[1].error)
    return f"{found.error:.1e} ({name})"


def _saved_cell(row: Row, name: str) -> str:
    """Saved MB and the number of storages."""
    saved = row.measurements[name].saved
    return f"{_mb(saved.nbytes)} ({saved.tensors})"


def _peak_cell(row: Row, name: str) -> str:
    """Peak MB."""
    return _mb(row.measurements[name].peak)


Cell = Callable[[Row, str], str]


def _memory_table(title: str, rows: Sequence[Row], cell: Cell) -> str:
    """One memory figure per alternative, one row per case and size."""
    columns = _columns(rows)
    body = [
        [row.case, _size(row.elements)]
        + [cell(row, name) if name in row.measurements else "-" for name in columns]
        for row in rows
    ]
    return f"{title}\n\n" + _table(["case", "elements", *columns], body)


def _bandwidth_table(rows: Sequence[Row]) -> str:
    """Achieved GB/s of the ideal traffic, and its share of a device copy's bandwidth."""
    columns = _columns(rows)
    body = []
    for row in rows:
        copy = _copy_rate(row)
        cells = [row.case, _size(row.elements), _mb(row.ideal_bytes), f"{copy / 1e9:.0f}"]
        for name in columns:
            found = row.measurements.get(name)
            rate = math.nan if found is None else row.ideal_bytes / found.seconds
            cells.append("-" if found is None else f"{rate / 1e9:.0f} ({rate / copy:.0%})")
        body.append(cells)
    headers = ["case", "elements", "ideal MB", "copy GB/s", *columns]
    title = "## Bandwidth: GB/s of ideal fused traffic (share of copy)"
    return f"{title}\n\n" + _table(headers, body)


def _copy_rate(row: Row) -> float:
    """Bytes per second of the device copy: float32 elements read once and written once."""
    return 2 * row.elements * 4 / row.copy_seconds if row.copy_seconds else math.nan


def _code_table(rows: Sequence[Row]) -> str:
    """Generation time, op counts and dispatched kernels of each case's Function."""
    body = []
    for row in {row.case: row for row in rows}.values():
        ops = row.generated.ops
        fused = "symgrad fused mode" if row.fused_native else "placeholder: compile(generated)"
        fused = fused if "fused" in row.measurements else "not run"
        cells = [f"{row.generated.seconds:.2f}", str(ops.forward), str(ops.backward)]
        kernels = [_kernels(row, name) for name in ("eager", "generated", "builtin")]
        body.append([row.case, *cells, f"{ops.ratio:.1f}", *kernels, fused])
    headers = ["case", "gen s", "forward ops", "backward ops", "bwd/fwd"]
    headers += ["kernels: eager", "generated", "builtin", "fused column"]
    return f"{CODE_HEADER}\n\n" + _table(headers, body)


def _kernels(row: Row, name: str) -> str:
    """Kernels an alternative dispatches in one forward+backward, '-' where not counted."""
    found = row.measurements.get(name)
    return "-" if found is None or found.kernels is None else str(found.kernels)


def _one_off_table(costs: Sequence[OneOff]) -> str:
    """C++ build and cached-load seconds and torch.compile's first call, one row per case."""
    body = [
        [
            one_off.case,
            *(_seconds(one_off.build.get(column)) for column in CPP_COLUMNS),
            *(_seconds(one_off.load.get(column)) for column in CPP_COLUMNS),
            _seconds(one_off.compile_first_call),
        ]
        for one_off in costs
    ]
    headers = ["case", *(f"{column} build" for column in CPP_COLUMNS)]
    headers += [*(f"{column} load (cached)" for column in CPP_COLUMNS), "compile first call"]
    return f"{ONE_OFF_HEADER}\n\n" + _table(headers, body)


def _measured(one_off: OneOff) -> bool:
    """Whether any one-off cost of the case was measured."""
    return bool(one_off.build or one_off.load) or one_off.compile_first_call is not None


def _seconds(seconds: float | None) -> str:
    """Seconds with two decimals, '-' where not measured."""
    return "-" if seconds is None else f"{seconds:.2f}"


def _targets(rows: Sequence[Row]) -> str:
    """The issue's eager-mode and fused-mode targets, checked row by row."""
    cuda = any(row.copy_seconds for row in rows)
    headers = ["case", "elements", "time <= eager", "saved <= eager", "peak <= eager"]
    headers += ["fused >= 0.95x compile", *(["fused >= 80% copy"] if cuda else [])]
    body = [[row.case, _size(row.elements), *_row_checks(row, cuda)] for row in rows]
    return "## Targets\n\n" + _table(headers, body) + "\n" + _median_lines(rows)


def _median_lines(rows: Sequence[Row]) -> str:
    """The median of generated/eager over the cases at each size, against its target."""
    lines = []
    for size in dict.fromkeys(row.elements for row in rows):
        ratios = [_ratio(row, "generated") for row in rows if row.elements == size]
        median = statistics.median(ratios)
        verdict = "meets" if median <= MEDIAN_TARGET else "misses"
        lines.append(
            f"- median generated/eager at {_size(size)} over {len(ratios)} cases: "
            f"{median:.2f}x ({verdict} the {MEDIAN_TARGET}x target)\n"
        )
    return "".join(lines)


def _row_checks(row: Row, cuda: bool) -> list[str]:
    """Each per-row target: generated against eager, fused against compile and copy."""
    eager, generated = row.measurements["eager"], row.measurements["generated"]
    time = generated.ratio_to(eager)
    checks = [
        _verdict(time <= 1, time),
        _at_most(generated.saved.nbytes, eager.saved.nbytes),
        _at_most(generated.peak, eager.peak),
        _fused_check(row),
    ]
    return [*checks, _copy_check(row)] if cuda else checks


def _at_most(value: float | None, limit: float | None) -> str:
    """Whether value <= limit, with their ratio; '-' when either is unknown."""
    if value is None or limit is None:
        return "-"
    ratio = value / limit if limit else (math.inf if value else 1.0)
    return _verdict(value <= limit, ratio)


def _fused_check(row: Row) -> str:
    """Whether fused runs at least 0.95x as fast as torch.compile of the formula."""
    fused, compiled = row.measurements.get("fused"), row.measurements.get("compile")
    if fused is None or compiled is None:
        return "-"
    speed = compiled.ratio_to(fused)
    return _verdict(speed >= 0.95, speed)


def _copy_check(row: Row) -> str:
    """Whether fused reaches 80% of a device copy's bandwidth on the ideal traffic."""
    fused = row.measurements.get("fused")
    if fused is None or not row.copy_seconds:
        return "-"
    share = (row.ideal_bytes / fused.seconds) / _copy_rate(row)
    return f"{'yes' if share >= 0.8 else '**no**'} ({share:.0%})"


def _verdict(ok: bool, ratio: float) -> str:
    """'yes' or '**no**', with the ratio behind it."""
    return f"{'yes' if ok else '**no**'} ({ratio:.2f}x)"


def _ratio(row: Row, name: str) -> float:
    """An alternative's median time over eager's."""
    return row.measurements[name].ratio_to(row.measurements["eager"])


def _primitive_table(costs: Sequence[PrimitiveCost], elements: int) -> str:
    """Each primitive's median time and its cost in multiplications."""
    body = [[cost.name, _ms(cost.seconds), f"{cost.relative:.2f}"] for cost in costs]
    title = f"## Primitive costs: one op on {_size(elements)} float32 elements"
    return f"{title}\n\n" + _table(["primitive", "median ms", "x * g = 1"], body)


def _scaling_table(rows: Sequence[ScalingRow]) -> str:
    """Generation time and op counts of each random formula."""
    body = []
    for row in rows:
        seconds = "-" if row.seconds is None else f"{row.seconds:.2f}"
        ops = row.ops
        counts = (
            ["-"] * 3 if ops is None else [str(ops.forward), str(ops.backward), f"{ops.ratio:.1f}"]
        )
        body.append(
            [str(row.target_ops), str(row.seed), str(row.formula_ops), seconds, *counts, row.status]
        )
    headers = ["ops asked", "seed", "formula ops", "gen s", "forward ops", "backward ops"]
    headers += ["bwd/fwd", "status"]
    return f"{SCALING_HEADER}\n\n" + _table(headers, body)
