"""Time forward+backward steps interleaved, and measure saved bytes and peak memory.

Definitions (the report repeats them):
- A step is `out = f(*inputs)` then `torch.autograd.grad(out, inputs needing grad, grad_out)`
  on pre-allocated inputs and output gradient; the gradients it returns are dropped.
- Saved bytes: during the forward, every tensor that autograd packs for backward is seen
  by `torch.autograd.graph.saved_tensors_hooks`; their storages are deduplicated and their
  sizes summed. Inputs and outputs count: keeping them for backward is what keeps a
  layer's input alive in a network.
- Peak bytes: the highest amount of memory allocated during one step above what was
  allocated when it started, returned gradients included. CUDA: torch.cuda's allocator
  statistics. CPU: the running sum of the allocations and frees that torch's profiler
  records with `profile_memory=True`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

Step = Callable[[], object]


@dataclass(frozen=True)
class Saved:
    """What one forward keeps for backward: distinct storages and their bytes."""

    tensors: int
    nbytes: int


def make_step(
    fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], grad: torch.Tensor
) -> Step:
    """One forward+backward of `fn` on `inputs`, with `grad` as the output's gradient."""
    wanted = tuple(t for t in inputs if t.requires_grad)

    def step() -> object:
        return torch.autograd.grad(fn(*inputs), wanted, grad)

    return step


def reuse_freed_heap() -> bool:
    """Make glibc keep freed memory for reuse, so that timings pay no fresh page faults.

    By default glibc maps each allocation above 32 MB afresh and unmaps it when freed; a
    1e7-element float32 tensor then costs about 10 ms of page faults per allocation, more
    than the arithmetic. With mmap off and no trimming, freed blocks are reused, as the
    CUDA caching allocator does on the GPU. Returns False where glibc is not available.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    # mallopt parameters from <malloc.h>: M_MMAP_MAX, M_TRIM_THRESHOLD, M_TOP_PAD.
    settings = ((-4, 0), (-1, 2**31 - 1), (-2, 64 << 20))
    return all(libc.mallopt(param, value) == 1 for param, value in settings)


def time_interleaved(
    steps: Mapping[str, Step], repeats: int, warmup: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each timed step, the steps run round-robin in a rotating order."""
    names = list(steps)
    for _ in range(warmup):
        for name in names:
            steps[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        first = repeat % len(names)
        for name in names[first:] + names[:first]:
            samples[name].append(time_step(steps[name], device))
    return samples


def spread(samples: list[float]) -> float:
    """Interquartile range over the median: how noisy the timings were."""
    if len(samples) < 2:
        return 0.0
    low, _, high = statistics.quantiles(samples, n=4)
    return (high - low) / statistics.median(samples)


def time_step(step: Step, device: torch.device) -> float:
    """Seconds one step takes: wall clock on CPU, CUDA events around it on the GPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        step()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3
    start_s = time.perf_counter()
    step()
    return time.perf_counter() - start_s


def wall_seconds(step: Step, device: torch.device) -> float:
    """Wall-clock seconds of one step, the device synchronised before and after (one-off costs)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure_saved(fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> Saved:
    """Distinct storages, and their bytes, that one forward of `fn` saves for backward."""
    packed: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        packed.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*inputs)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in packed}
    return Saved(len(storages), sum(storages.values()))


def measure_peak(step: Step, device: torch.device) -> int | None:
    """Peak bytes allocated during one step above the start (None if it cannot be seen)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    return _cpu_peak(step)


def _cpu_peak(step: Step) -> int | None:
    """Peak of the running sum of the CPU allocations torch's profiler records in a step."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    with (
        _quiet_stderr(),
        torch.profiler.profile(activities=activities, profile_memory=True) as prof,
    ):
        step()
    try:
        events: list[Any] = list(prof.profiler.kineto_results.events())
    except AttributeError:  # a torch without kineto results
        return None
    memory = [e for e in events if e.name() == "[memory]" and e.device_type().name == "CPU"]
    live = peak = 0
    for event in sorted(memory, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2: kineto prints two lines there for every profile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def copy_seconds(elements: int, repeats: int, device: torch.device) -> float:
    """Median seconds of a float32 device-to-device copy: the memory-bandwidth limit."""
    source = torch.randn(elements, device=device)
    target = torch.empty_like(source)
    steps = {"copy": lambda: target.copy_(source)}
    return statistics.median(time_interleaved(steps, repeats, warmup=3, device=device)["copy"])
