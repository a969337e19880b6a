"""The Triton kernels of a `mode: fused` spec: the C++ fused loops, spelled for Triton.

Note [Triton kernels]: the loops are symgrad.backends.cpp.fused's (the same acceptance
rules: Note [Fused loops]), printed by TritonPrinter over blocks of float32 values
(float16 and bfloat16 are loaded and converted, and stored back in the input's dtype).
Unlike the CPU loops, the forward kernel stores nothing but the output: the backward
kernel reads the inputs and recomputes (`fused_loops(store=False)`). A GPU elementwise
kernel is bound by memory traffic, not arithmetic: a stored derivative is one more
buffer written by the forward and read by the backward (six passes over memory for one
input and one output, against five, as torch.compile makes), and one more buffer held
between them, where the input is held anyway. Each tensor input of the broadcast shape
is read flat; one that covers the trailing dims (a per-channel parameter) is read in
place, its index taken modulo its size, and its gradient summed over tiles of rows in
the backward kernel (Note [eager kernels]); any other is expanded first. This slice
covers one output, not reduced, over tensor and float inputs; any other spec keeps the
torch Function alone (`triton_kernels` returns None).
"""

from __future__ import annotations

from dataclasses import dataclass

from symgrad.ad.ir import Derived
from symgrad.backends.cpp.fused import Loop, fused_loops
from symgrad.backends.triton.printer import TritonPrinter
from symgrad.frontend.model import InputType


@dataclass(frozen=True)
class Kernel:
    """One kernel: the tensors it loads, the numbers it takes, its lines and its stores."""

    loads: tuple[str, ...]
    numbers: tuple[str, ...]
    lines: tuple[str, ...]
    stores: tuple[tuple[str, str], ...]
    # What the wrapper passes for each load, in order.
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class TritonKernels:
    """What templates/python/triton.py.jinja lays out after the module's Function."""

    module: str
    class_name: str
    inputs: tuple[str, ...]
    tensor_inputs: tuple[str, ...]
    number_inputs: tuple[str, ...]
    output: str
    grad: str
    forward: Kernel
    backward: Kernel
    # (input, its gradient's name) per tensor input that gets a gradient, in order.
    gradients: tuple[tuple[str, str], ...]
    # What the eager Function saves: the backward kernel's loads but the gradient.
    kept: tuple[str, ...]


def triton_kernels(derived: Derived) -> TritonKernels | None:
    """The Triton kernels of `derived` (Note [Triton kernels]), or None for a spec
    this slice does not cover."""
    spec = derived.spec
    if spec.mode != "fused" or len(derived.outputs) != 1 or len(spec.outputs) != 1:
        return None
    if any(i.type not in (InputType.TENSOR, InputType.FLOAT) for i in spec.inputs):
        return None
    tensors = [i.name for i in spec.tensor_inputs]
    received = {name: f"grad_{name}" for name in tensors}
    # Nothing stored for the backward: it recomputes from the inputs (Note [Triton kernels]).
    printer = TritonPrinter({})
    loops = fused_loops(derived, {}, received, received, received, "", printer, store=False)
    if loops is None or any(loops.summed) or loops.unused or loops.required:
        return None
    grad = derived.backward[0].grad.name
    if len(loops.gradients) != len(tensors):
        return None  # an input without a gradient: the Function alone
    gradients = tuple((name, received[name]) for name in tensors)
    return TritonKernels(
        module=spec.module,
        class_name=spec.name,
        inputs=tuple(i.name for i in spec.inputs),
        tensor_inputs=tuple(tensors),
        number_inputs=tuple(i.name for i in spec.inputs if not i.is_tensor),
        output=derived.outputs[0].name,
        grad=grad,
        forward=_kernel(loops.forward),
        backward=_kernel(loops.backward),
        gradients=gradients,
        kept=tuple(name for name in loops.backward.arguments if name != grad),
    )


def _kernel(loop: Loop) -> Kernel:
    """A fused loop as a kernel: its invariants are lines like any other."""
    return Kernel(
        loads=loop.loads,
        numbers=loop.numbers,
        lines=(*loop.invariants, *loop.lines),
        stores=tuple((pointer.removesuffix("_data"), value) for pointer, value in loop.stores),
        arguments=loop.arguments or loop.loads,
    )
