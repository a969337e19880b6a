"""Codegen scaling: generation time and op counts of seeded random formulas of 10 to 1,000 ops.

A formula is a random DAG over three tensor inputs: each `where` intermediate applies one
smooth function or one arithmetic operator to earlier values (mostly recent ones, so the
DAG is deep, sometimes older ones, so values are reused), and the output adds up every
value nothing else used. Each formula is generated in a fresh process under a time limit,
so a generator that hangs is reported as such instead of stopping the suite.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from dataclasses import dataclass
from typing import Any

from bench.opcount import OpCounts, count_ops

UNARY = ("sin", "cos", "tanh", "sigmoid", "softplus", "exp", "atan", "erf", "log1p")
BINARY = ("+", "-", "*")
INPUTS = ("x", "y", "z")
# How far back a "recent" operand may be; older operands are drawn a quarter of the time.
RECENT = 6


@dataclass(frozen=True)
class Formula:
    """A random formula as spec data, and how many operations it has."""

    spec: dict[str, Any]
    ops: int


@dataclass(frozen=True)
class ScalingRow:
    """Generation of one random formula: time and op counts, or why it did not finish."""

    target_ops: int
    seed: int
    formula_ops: int
    seconds: float | None
    ops: OpCounts | None
    # "ok", "timeout after N s", or the error symgrad raised.
    status: str


def random_formula(target_ops: int, seed: int) -> Formula:
    """A seeded random formula of at least `target_ops` operations (at most one more)."""
    rng = random.Random(seed)
    values = list(INPUTS)
    unused = set(INPUTS)
    where: dict[str, str] = {}
    while len(where) + len(unused) - 1 < target_ops:
        name = f"v{len(where)}"
        where[name] = _random_node(rng, values, unused)
        values.append(name)
        unused.add(name)
    output = " + ".join(sorted(unused, key=values.index))
    ops = len(where) + len(unused) - 1
    spec = {
        "name": f"Random{target_ops}S{seed}",
        "inputs": {name: "tensor" for name in INPUTS},
        "where": where,
        "outputs": {"out": output},
    }
    return Formula(spec, ops)


def _random_node(rng: random.Random, values: list[str], unused: set[str]) -> str:
    """One operation on earlier values, preferring those nothing uses yet."""
    first = _pick(rng, values, unused, exclude=None)
    if rng.random() < 0.5:
        return f"{rng.choice(UNARY)}({first})"
    second = _pick(rng, values, unused, exclude=first)
    return f"{first} {rng.choice(BINARY)} {second}"


def _pick(rng: random.Random, values: list[str], unused: set[str], exclude: str | None) -> str:
    """An operand: an unused value half the time, else a recent or, less often, any value."""
    candidates = [v for v in values if v != exclude]
    fresh = [v for v in candidates if v in unused]
    if fresh and rng.random() < 0.5:
        choice = rng.choice(fresh)
    elif rng.random() < 0.75:
        choice = rng.choice(candidates[-RECENT:])
    else:
        choice = rng.choice(candidates)
    unused.discard(choice)
    return choice


def generate_formula(spec: dict[str, Any]) -> tuple[float, OpCounts]:
    """Seconds symgrad takes to generate `spec`, and the op counts of the result."""
    import symgrad  # imported here: this runs in a fresh worker process

    start = time.perf_counter()
    files = symgrad.generate(symgrad.spec_from_dict(spec))
    seconds = time.perf_counter() - start
    module = next(source for name, source in files.items() if not name.startswith("test_"))
    return seconds, count_ops(module)


def run_scaling(sizes: tuple[int, ...], seeds: int, timeout: float) -> list[ScalingRow]:
    """Generate `seeds` random formulas of each size, each in a fresh process."""
    return [_run_one(size, seed, timeout) for size in sizes for seed in range(seeds)]


def _run_one(target_ops: int, seed: int, timeout: float) -> ScalingRow:
    """Generate one random formula in a worker process, within `timeout` seconds."""
    formula = random_formula(target_ops, seed)
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        pending = pool.apply_async(generate_formula, (formula.spec,))
        try:
            seconds, ops = pending.get(timeout)
        except multiprocessing.TimeoutError:
            status = f"timeout after {timeout:g} s"
            return ScalingRow(target_ops, seed, formula.ops, None, None, status)
        except Exception as error:  # symgrad's failure is a result to report
            message = f"{type(error).__name__}: {error}".splitlines()[0]
            return ScalingRow(target_ops, seed, formula.ops, None, None, message)
    return ScalingRow(target_ops, seed, formula.ops, seconds, ops, "ok")
