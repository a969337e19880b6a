"""Run the cases: generate each Function, build the alternatives, time and measure them."""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch._dynamo

try:
    from torch._inductor.utils import fresh_cache
except ImportError:  # older torch names it fresh_inductor_cache
    from torch._inductor.utils import fresh_inductor_cache as fresh_cache

from bench.build import (
    Generated,
    UnsupportedSpecError,
    generate_case,
    generate_cpp,
    generate_fused,
)
from bench.cases import Case, Fn
from bench.measure import (
    Saved,
    copy_seconds,
    make_step,
    measure_peak,
    measure_saved,
    spread,
    time_interleaved,
    wall_seconds,
)
from bench.opcount import count_kernels
from bench.primitives import PrimitiveCost
from bench.scaling import ScalingRow

# The columns of every table, in order; "eager" is autograd of the plain formula.
ALTERNATIVES = ("eager", "generated", "fused", "compile", "builtin", "cpp", "cpp_fused")
# The alternatives that run through torch.compile (fused while it is a placeholder).
COMPILED = ("fused", "compile")
# The columns of the C++ target, each a module built and loaded once per case.
CPP_COLUMNS = ("cpp", "cpp_fused")


@dataclass(frozen=True)
class Settings:
    """How to run the cases."""

    device: torch.device
    sizes: tuple[int, ...]
    repeats: int
    warmup: int
    # False skips torch.compile (the compile column, and the fused placeholder).
    compile: bool
    # The C++ target's columns to build and time (cpp: ATen operations; cpp_fused).
    cpp: tuple[str, ...] = ()
    # The floating inputs' dtype (the cases make float32; others are cast from it).
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class Measurement:
    """One alternative at one size: step times by round, saved tensors, peak memory."""

    # Seconds of each timed round, in round order (round i of every alternative ran together).
    samples: tuple[float, ...]
    saved: Saved
    peak: int | None
    # Largest difference from eager autograd's output and gradients, relative to their scale.
    error: float
    # Non-view aten operators of one forward+backward; None for compiled alternatives.
    kernels: int | None

    @property
    def seconds(self) -> float:
        """Median seconds of a step."""
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """Interquartile range of the timings over their median."""
        return spread(list(self.samples))

    def ratio_to(self, other: Measurement) -> float:
        """Median over rounds of this time over `other`'s in the same round.

        Pairing by round cancels load from other processes that changes between rounds.
        """
        pairs = zip(self.samples, other.samples, strict=True)
        return statistics.median(mine / theirs for mine, theirs in pairs)


@dataclass(frozen=True)
class Row:
    """One case at one size."""

    case: str
    elements: int
    generated: Generated
    # Whether the fused column is symgrad's own fused mode (False: the placeholder).
    fused_native: bool
    measurements: dict[str, Measurement]
    # Bytes an ideal fused forward+backward reads and writes (see bench.report).
    ideal_bytes: int
    # Median seconds of a device copy of `elements` float32 values (CUDA only).
    copy_seconds: float | None


@dataclass(frozen=True)
class Skipped:
    """A case this symgrad cannot generate, with symgrad's reason."""

    case: str
    reason: str


@dataclass
class OneOff:
    """A case's one-off seconds, never part of the step times (absent: not measured)."""

    case: str
    # By C++ column: the first build and load, and a later load with the build cached.
    build: dict[str, float] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)
    # torch.compile's first forward+backward of the formula, cold (see _compile_first_call).
    compile_first_call: float | None = None


@dataclass
class Results:
    """Everything one run measured."""

    rows: list[Row] = field(default_factory=list)
    one_off: list[OneOff] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Codegen scaling (--scaling) and single-primitive costs (skipped by --quick).
    scaling: list[ScalingRow] = field(default_factory=list)
    primitives: list[PrimitiveCost] = field(default_factory=list)
    primitive_elements: int = 0


def run_cases(cases: tuple[Case, ...], settings: Settings) -> Results:
    """Measure every case at every size; skip the cases this symgrad cannot generate."""
    results = Results()
    with tempfile.TemporaryDirectory(prefix="symgrad-bench-") as workdir:
        for case in cases:
            try:
                rows, one_off = _run_case(case, settings, Path(workdir))
            except UnsupportedSpecError as error:
                _progress(f"{case.name}: skipped, unsupported by this symgrad")
                results.skipped.append(Skipped(case.name, str(error)))
                continue
            results.rows.extend(rows)
            results.one_off.append(one_off)
    return results


def _run_case(case: Case, settings: Settings, workdir: Path) -> tuple[list[Row], OneOff]:
    """Generate the case's Function once, note its one-off costs, then measure every size."""
    generated = generate_case(case.spec_path, workdir)
    fused = generate_fused(case.spec_path, workdir)
    functions = _alternatives(case, generated, fused, settings.compile)
    one_off = OneOff(case.name)
    for column in settings.cpp:
        _add_cpp(case, column, workdir, functions, one_off)
    if settings.compile:
        one_off.compile_first_call = _compile_first_call(case, settings)
        _progress(f"{case.name}: torch.compile's first call {one_off.compile_first_call:.1f} s")
    rows = []
    for elements in settings.sizes:
        _progress(f"{case.name}: {elements:,} elements")
        measurements, ideal = _measure_size(case, functions, elements, settings)
        copy = None
        if settings.device.type == "cuda":
            copy = copy_seconds(elements, settings.repeats, settings.device)
        rows.append(
            Row(case.name, elements, generated, fused is not None, measurements, ideal, copy)
        )
    return rows, one_off


def _add_cpp(
    case: Case, column: str, workdir: Path, functions: dict[str, Fn], one_off: OneOff
) -> None:
    """Build the C++ column's Function, where symgrad gives one; note its build and load."""
    built = generate_cpp(case.spec_path, workdir, fused=column == "cpp_fused")
    if built is None:
        return
    functions[column] = functools.partial(built.function, **case.numbers)
    one_off.build[column], one_off.load[column] = built.build_seconds, built.load_seconds
    _progress(
        f"{case.name}: {column} built in {built.build_seconds:.1f} s, "
        f"loads cached in {built.load_seconds:.2f} s"
    )


def _compile_first_call(case: Case, settings: Settings) -> float:
    """Seconds of the compile column's first forward+backward at the first size, cold.

    A warm cache makes it look fast (silu on a 2-core CPU: 3.7 s cold, 0.1 s with inductor's
    on-disk cache warm), so it runs in a fresh state: torch._dynamo.reset() forgets compiled
    code, and torch._inductor.utils.fresh_cache() points TORCHINDUCTOR_CACHE_DIR (and
    TRITON_CACHE_DIR) at a new empty folder and clears inductor's in-memory caches. The
    once-per-process start-up is paid before, by _start_inductor. Afterwards dynamo is
    reset again: the compile column compiles anew in its warm-up, with the usual cache.
    """
    _start_inductor(settings.device)
    inputs, grad = _inputs(case, settings.sizes[0], settings.device, settings.dtype)
    with fresh_cache():
        torch._dynamo.reset()
        compiled = functools.partial(_compiled(case.reference), **case.numbers)
        seconds = wall_seconds(make_step(compiled, inputs, grad), settings.device)
    torch._dynamo.reset()
    return seconds


@functools.cache
def _start_inductor(device: torch.device) -> None:
    """Pay torch.compile's once-per-process start-up (imports, compile workers) on x * 2.

    Several seconds, it would otherwise all be charged to the first case's first call.
    """
    x = torch.ones(8, device=device, requires_grad=True)
    with fresh_cache():
        seconds = wall_seconds(make_step(_compiled(lambda t: t * 2), (x,), x.detach()), device)
    torch._dynamo.reset()
    _progress(f"torch.compile's start-up, once per process (not reported): {seconds:.1f} s")


def _alternatives(
    case: Case, generated: Generated, fused: Generated | None, compile_: bool
) -> dict[str, Fn]:
    """The callables to compare, numbers bound, in ALTERNATIVES order (absent ones left out)."""
    functions: dict[str, Fn | None] = {
        "eager": case.reference,
        "generated": generated.function,
        "fused": _fused_callable(generated, fused, compile_),
        "compile": _compiled(case.reference) if compile_ else None,
        "builtin": case.builtin,
    }
    return {
        name: functools.partial(fn, **case.numbers)
        for name, fn in functions.items()
        if fn is not None
    }


def _fused_callable(generated: Generated, fused: Generated | None, compile_: bool) -> Fn | None:
    """symgrad's fused Function where it has one, else torch.compile of the generated call.

    See Note [fused hook] in bench.build.
    """
    if fused is not None:
        return fused.function
    return _compiled(generated.function) if compile_ else None


def _compiled(fn: Fn) -> Fn:
    """torch.compile of `fn`, static shapes (each size compiles once, in the warm-up)."""
    compiled: Fn = torch.compile(fn, dynamic=False)
    return compiled


def _measure_size(
    case: Case, functions: dict[str, Fn], elements: int, settings: Settings
) -> tuple[dict[str, Measurement], int]:
    """Time all alternatives interleaved at one size, then measure their memory."""
    inputs, grad = _inputs(case, elements, settings.device, settings.dtype)
    steps = {name: make_step(fn, inputs, grad) for name, fn in functions.items()}
    errors = _errors(functions, inputs, grad)
    samples = time_interleaved(steps, settings.repeats, settings.warmup, settings.device)
    measurements = {
        name: Measurement(
            tuple(samples[name]),
            measure_saved(functions[name], inputs),
            measure_peak(steps[name], settings.device),
            errors[name],
            None if name in COMPILED else count_kernels(functions[name], inputs, grad),
        )
        for name in functions
    }
    return measurements, _ideal_bytes(inputs, grad)


def _inputs(
    case: Case, elements: int, device: torch.device, dtype: torch.dtype = torch.float32
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """The case's seeded inputs at one size in `dtype`, and a random gradient for its output."""
    torch.manual_seed(0)
    inputs = tuple(_cast(t, dtype) for t in case.make_inputs(elements, device))
    with torch.no_grad():
        grad = torch.randn_like(case.reference(*inputs, **case.numbers))
    return inputs, grad


def _cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A floating input in `dtype`, a leaf again with its requires_grad (others as they are)."""
    if not tensor.is_floating_point() or tensor.dtype == dtype:
        return tensor
    return tensor.detach().to(dtype).requires_grad_(tensor.requires_grad)


def _errors(
    functions: dict[str, Fn], inputs: tuple[torch.Tensor, ...], grad: torch.Tensor
) -> dict[str, float]:
    """Each alternative's largest deviation from eager autograd, output and gradients."""
    wanted = tuple(t for t in inputs if t.requires_grad)

    def results(fn: Callable[..., torch.Tensor]) -> list[torch.Tensor]:
        out = fn(*inputs)
        return [out.detach(), *torch.autograd.grad(out, wanted, grad)]

    expected = results(functions["eager"])
    return {
        name: max(_relative_error(a, b) for a, b in zip(results(fn), expected, strict=True))
        for name, fn in functions.items()
    }


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest absolute difference, over the largest magnitude of the expected tensor."""
    scale = expected.abs().max().clamp_min(1e-30)
    return float(((actual.double() - expected.double()).abs().max() / scale).item())


def _ideal_bytes(inputs: tuple[torch.Tensor, ...], grad: torch.Tensor) -> int:
    """Bytes an ideal fused fwd+bwd moves: inputs twice, output and its grad, input grads."""
    read_twice = 2 * sum(t.nbytes for t in inputs)
    return read_twice + 2 * grad.nbytes + sum(t.nbytes for t in inputs if t.requires_grad)


def _progress(message: str) -> None:
    """Tell the person running the suite where it is (stderr keeps stdout for results)."""
    print(f"bench: {message}", file=sys.stderr, flush=True)
