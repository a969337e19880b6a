"""The Triton kernels of a `mode: fused` spec: the C++ fused loops, spelled for Triton.

Note [Triton kernels]: the loops are symgrad.backends.cpp.fused's (the same acceptance
rules: Note [Fused loops]), printed by TritonPrinter over blocks of float32 values
(float16 and bfloat16 are loaded and converted, and stored back in the input's dtype).
Unlike the CPU loops, the forward kernel stores nothing but the outputs: the backward
kernel reads the inputs and recomputes (`fused_loops(store=False)`). A GPU elementwise
kernel is bound by memory traffic, not arithmetic: a stored derivative is one more
buffer written by the forward and read by the backward (six passes over memory for one
input and one output, against five, as torch.compile makes), and one more buffer held
between them, where the input is held anyway. Each tensor input of the broadcast shape
is read flat; one that covers the trailing dims (a per-channel parameter) is read in
place, its index taken modulo its size, and its gradient summed over tiles of rows in
the backward kernel (Note [eager kernels]); any other is expanded first.

An output summed or averaged over every element (a loss) is summed per block by the
forward kernel, one float32 partial sum per program, which torch then adds up (and
divides by the element count for a mean): no atomics, so the same inputs give the same
bits. Its gradient is one value, which the backward kernel loads once (`scalars`), and
a mean's element count is the kernels' element count. An output reduced over the last
dim (a loss per row) makes the forward run over tiles of rows and columns (`rows`), one
float32 partial sum per row and tile of columns, added up by torch the same way; its
gradient holds one value per row, read at `offsets // row_length` (`rowwise`), and a
mean's count is the row length. Several outputs are stored by one forward kernel, and
their gradients read by one backward kernel, which takes a missing gradient (None:
`optional`) as zero. This slice covers outputs per element or reduced over every element
or over the last dim (not both kinds in one spec), over tensor and float inputs, where
each output reads every tensor input (so that it has the kernels' shape, or reduces a
value of that shape); any other spec keeps the torch Function alone (`triton_kernels`
returns None).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from symgrad.ad.ir import Derived
from symgrad.backends.cpp.fused import FusedLoops, Loop, Summed, fused_loops
from symgrad.backends.triton.printer import TritonPrinter
from symgrad.frontend.model import InputType


@dataclass(frozen=True)
class Kernel:
    """One kernel: the tensors it loads, the numbers it takes, its lines and its stores."""

    loads: tuple[str, ...]
    numbers: tuple[str, ...]
    lines: tuple[str, ...]
    stores: tuple[tuple[str, str], ...]
    # Loads of one value (a reduced output's gradient), read once, not per element.
    scalars: tuple[str, ...] = ()
    # Loads of one value per row (a gradient of an output reduced over the last dim).
    rowwise: tuple[str, ...] = ()
    # What the wrapper passes for each load (a rowwise one: its output's gradient).
    arguments: tuple[str, ...] = ()
    # Loads that may be None (the gradients of several outputs): zero where they are.
    optional: tuple[str, ...] = ()
    # Per store: summed over the block (one partial sum per program), not per element.
    reduced: tuple[bool, ...] = ()


@dataclass(frozen=True)
class TritonKernels:
    """What templates/python/triton.py.jinja lays out after the module's Function."""

    module: str
    class_name: str
    inputs: tuple[str, ...]
    tensor_inputs: tuple[str, ...]
    number_inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    # Each output's gradient, in the order of `outputs`.
    grads: tuple[str, ...]
    # Per output: how it is reduced (every element, or the last dim), or None.
    summed: tuple[Summed | None, ...]
    # Whether the forward runs over tiles of rows: it reduces outputs over the last dim.
    rows: bool
    # (name, its value) per element count the backward reads (a mean's): `n_elements`, or
    # `row_length` where the mean is over the last dim.
    counts: tuple[tuple[str, str], ...]
    forward: Kernel
    backward: Kernel
    # (input, its gradient's name) per tensor input that gets a gradient, in order.
    gradients: tuple[tuple[str, str], ...]
    # What the eager Function saves: the backward kernel's loads but the gradients.
    kept: tuple[str, ...]


def triton_kernels(derived: Derived) -> TritonKernels | None:
    """The Triton kernels of `derived` (Note [Triton kernels]), or None for a spec
    this slice does not cover."""
    spec = derived.spec
    if spec.mode != "fused" or len(derived.outputs) != len(spec.outputs):
        return None
    if any(i.type not in (InputType.TENSOR, InputType.FLOAT) for i in spec.inputs):
        return None
    tensors = [i.name for i in spec.tensor_inputs]
    received = {name: f"grad_{name}" for name in tensors}
    # Nothing stored for the backward: it recomputes from the inputs (Note [Triton kernels]).
    printer = TritonPrinter({})
    loops = fused_loops(derived, {}, received, received, received, "", printer, store=False)
    if loops is None or loops.unused or not loops.backward.loads:
        return None
    by_output = {part.output: part.grad.name for part in derived.backward}
    grads = tuple(by_output[o] for o in derived.outputs)
    rows = _by_rows(loops.summed)
    counts = _counts(derived, rows)
    arguments = _arguments(loops, grads, rows)
    if rows is None or counts is None or arguments is None or not _covered(derived):
        return None
    if len(loops.gradients) != len(tensors):
        return None  # an input without a gradient: the Function alone
    # A reduced output's gradient: one value, or one per row (read as such where the
    # loop reads it unsqueezed, and where it keeps the reduced dim).
    reduced = tuple(g for g, how in zip(grads, loops.summed, strict=True) if how is not None)
    unsqueezed = (n for n, a in zip(loops.backward.loads, arguments, strict=True) if n != a)
    scalars, rowwise = ((), (*unsqueezed, *reduced)) if rows else (reduced, ())
    # Several outputs: any gradient may be None, and so may each load made from one.
    pairs = zip(loops.backward.loads, arguments, strict=True)
    optional = tuple(n for n, a in pairs if a in grads) if len(grads) > 1 else ()
    return TritonKernels(
        module=spec.module,
        class_name=spec.name,
        inputs=tuple(i.name for i in spec.inputs),
        tensor_inputs=tuple(tensors),
        number_inputs=tuple(i.name for i in spec.inputs if not i.is_tensor),
        outputs=tuple(o.name for o in derived.outputs),
        grads=grads,
        summed=loops.summed,
        rows=rows,
        counts=counts,
        forward=_kernel(loops.forward, reduced=tuple(bool(how) for how in loops.summed)),
        backward=_kernel(loops.backward, scalars, optional, rowwise=rowwise, arguments=arguments),
        gradients=tuple((name, received[name]) for name in tensors),
        kept=tuple(name for name in arguments if name not in grads),
    )


def _by_rows(summed: tuple[Summed | None, ...]) -> bool | None:
    """Whether the reduced outputs are reduced over the last dim (True) or over every
    element (False); None where they mix the two, or reduce over other dims."""
    kinds = {how.dims for how in summed if how is not None}
    if kinds <= {()}:
        return False
    return True if kinds == {(-1,)} else None


def _counts(derived: Derived, rows: bool | None) -> tuple[tuple[str, str], ...] | None:
    """(name, value in the launchers) of each element count the backward reads, or None
    for a count of other dims than the reductions the kernels make."""
    printer = TritonPrinter({})  # the names fused_loops' printer gave them
    wanted = (-1,) if rows else None
    if any(fact.expr.dims != wanted for fact in derived.shape_facts):
        return None
    value = "row_length" if rows else "n_elements"
    return tuple((printer.doprint(fact.target), value) for fact in derived.shape_facts)


def _arguments(
    loops: FusedLoops, grads: tuple[str, ...], rows: bool | None
) -> tuple[str, ...] | None:
    """What the launchers pass for each backward load: its own name, or for a gradient
    unsqueezed over the last dim (a per-row output's), that gradient; None for any
    other unsqueeze."""
    made = []
    for load, argument in zip(loops.backward.loads, loops.backward.arguments, strict=True):
        if argument != load:
            found = [g for g in grads if argument == f"({g}.dim() > 0 ? {g}.unsqueeze(-1) : {g})"]
            if not (rows and found):
                return None
            argument = found[0]
        made.append(argument)
    return tuple(made)


def _covered(derived: Derived) -> bool:
    """Whether every output has the kernels' shape (one value per element) or reduces a
    value of that shape: it reads each tensor input, as does each value whose elements
    the backward counts (a mean's)."""
    tensors = {i.symbol for i in derived.spec.tensor_inputs}
    reads: dict[sympy.Basic, set[sympy.Basic]] = {}

    def read(expr: sympy.Basic) -> set[sympy.Basic]:
        """The inputs `expr` reads, through the forward values it names."""
        return set().union(*(reads.get(s, {s}) for s in expr.free_symbols))

    for statement in derived.forward:
        reads[statement.target] = read(statement.expr)
    if any(not tensors <= reads[output.symbol] for output in derived.outputs):
        return False
    return all(tensors <= read(fact.expr.args[0]) for fact in derived.shape_facts)


def _kernel(
    loop: Loop,
    scalars: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
    reduced: tuple[bool, ...] = (),
    rowwise: tuple[str, ...] = (),
    arguments: tuple[str, ...] = (),
) -> Kernel:
    """A fused loop as a kernel: its invariants are lines like any other."""
    return Kernel(
        loads=loop.loads,
        numbers=loop.numbers,
        lines=(*loop.invariants, *loop.lines),
        stores=tuple((pointer.removesuffix("_data"), value) for pointer, value in loop.stores),
        scalars=tuple(name for name in loop.loads if name in scalars),
        optional=tuple(name for name in loop.loads if name in optional),
        reduced=reduced or tuple(False for _ in loop.stores),
        rowwise=tuple(name for name in loop.loads if name in rowwise),
        arguments=arguments or loop.loads,
    )
