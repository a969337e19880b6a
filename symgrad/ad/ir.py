"""The IR backends print: the forward, the scheduled backward and jvp, what to save.

Everything here is plain data over sympy expressions; names are already chosen. An
emitter (Python today; C++ or a fused kernel later) only prints it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import sympy

from symgrad.frontend.model import Input, Output, Spec


@dataclass(frozen=True)
class Assignment:
    """`target = expr`, one statement of generated code."""

    target: sympy.Symbol
    expr: sympy.Expr


@dataclass(frozen=True)
class GuardedBlock:
    """Statements that run only when one of `inputs` needs a gradient."""

    inputs: tuple[Input, ...]
    statements: tuple[Assignment, ...]


@dataclass(frozen=True)
class InputGradient:
    """One output's contribution to one input's gradient."""

    input: Input
    # Statements only this contribution uses, computed inside its guard.
    statements: tuple[Assignment, ...]
    # grad_output times d output / d input, in the shape of the output.
    expr: sympy.Expr


@dataclass(frozen=True)
class OutputBackward:
    """The part of the backward that runs when one output's incoming gradient exists."""

    output: Output
    # The symbol of the incoming gradient (`grad_y`).
    grad: sympy.Symbol
    # Statements several of this output's input gradients use.
    shared: tuple[GuardedBlock, ...]
    gradients: tuple[InputGradient, ...]


@dataclass(frozen=True)
class Derived:
    """Everything an emitter needs: the forward, the backward and what to save."""

    spec: Spec
    # The forward as straight-line code; outputs are assigned to their own names.
    forward: tuple[Assignment, ...]
    # Tensor inputs and outputs the backward reads, in declaration order.
    saved_tensors: tuple[sympy.Symbol, ...]
    # Number inputs the backward reads.
    saved_numbers: tuple[Input, ...]
    # Differentiable inputs whose shape the backward needs but that are not saved.
    saved_shapes: tuple[Input, ...]
    # Statements that the parts of several outputs use (recomputed forward values and
    # shared temporaries), guarded by the inputs that need them.
    prelude: tuple[GuardedBlock, ...]
    backward: tuple[OutputBackward, ...]
    # d output / d input for the docstring, keyed by (output name, input name).
    # (None where the formula is too long to be worth showing.)
    partials: Mapping[tuple[str, str], sympy.Expr | None]
    # Every symbol that stands for a tensor (inputs, values, gradients, temporaries).
    tensor_symbols: frozenset[sympy.Basic]
    # Every name the generated code uses, so emitters can pick fresh ones.
    names: frozenset[str]
    # The temporaries symgrad made (`_t0`, ...), which emitters may rename.
    temporaries: frozenset[sympy.Symbol] = frozenset()
    # Reduced-shape forward values returned as extra outputs for the backward to save
    # (Note [Residuals] in symgrad.ad.residuals); the public function does not return them.
    residuals: tuple[Output, ...] = ()
    # Full-size forward values the backward reads saved instead of recomputing, returned
    # as extra non-differentiable outputs (Note [Saved values] in symgrad.ad.saving).
    saved_values: tuple[Output, ...] = ()
    # What recomputes them from the inputs when the backward runs with grad mode on.
    recompute: tuple[Assignment, ...] = ()
    # Facts about shapes the backward reads (`_tN = Count(argument, *dims)`, the number a
    # mean divides by; `_tN = ShapeOf(reduction)`), computed from the input shapes in
    # setup_context (symgrad.language.reductions.ShapeFact).
    shape_facts: tuple[Assignment, ...] = ()
    # The forward-mode derivative (the Function's jvp), scheduled like the backward.
    jvp: JvpPlan | None = None
    # The in-place variant's derivation (Note [In-place variants] in symgrad.ad.inplace),
    # when the spec asks for one.
    inplace: Derived | None = None

    @property
    def outputs(self) -> tuple[Output, ...]:
        """What `forward` returns: the spec's outputs, the residuals, the saved values."""
        return self.spec.outputs + self.residuals + self.saved_values


class Namer:
    """Hands out names that collide with nothing the user declared or we already made."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)
        self.counter = itertools.count()
        # Every temporary handed out, so emitters can renumber them in reading order.
        self.made: list[sympy.Symbol] = []

    def fresh(self, base: str) -> str:
        """`base`, or `base` with underscores appended until it is free."""
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def temporary(self) -> sympy.Symbol:
        """The next free `_tN` symbol."""
        while True:
            name = f"_t{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                self.made.append(sympy.Symbol(name, real=True))
                return self.made[-1]

    def temporaries(self) -> Iterator[sympy.Symbol]:
        """An endless supply of temporaries, for sympy.cse."""
        while True:
            yield self.temporary()


def closure(used: set[sympy.Basic], assignments: Sequence[Assignment]) -> set[sympy.Basic]:
    """The targets in `assignments` that `used` depends on, directly or not."""
    needed: set[sympy.Basic] = set()
    frontier = set(used)
    for assignment in reversed(assignments):
        if assignment.target in frontier:
            needed.add(assignment.target)
            frontier |= assignment.expr.free_symbols
    return needed


def cse(exprs: Sequence[sympy.Expr], namer: Namer) -> tuple[list[Assignment], list[sympy.Expr]]:
    """Name the subexpressions that occur more than once across `exprs`."""
    replacements, reduced = sympy.cse(list(exprs), symbols=namer.temporaries(), order="none")
    return (
        [Assignment(t, integral_floats(e)) for t, e in replacements],
        [integral_floats(e) for e in reduced],
    )


def integral_floats(expr: sympy.Expr) -> sympy.Expr:
    """Floats that are whole numbers as integers, so `1.0*d` (from 0.5*2*d) is just `d`.

    Each would otherwise cost a kernel launch and a pass over memory.
    """
    floats = [f for f in expr.atoms(sympy.Float) if float(f).is_integer() and abs(f) < 2**31]
    if not floats:
        return expr
    result: sympy.Expr = expr.xreplace({f: sympy.Integer(int(f)) for f in floats})
    return result


@dataclass(frozen=True)
class OutputGradients:
    """One output's incoming-gradient symbol and the gradient it sends to each input."""

    output: Output
    grad: sympy.Symbol
    gradients: Mapping[Input, sympy.Expr]
    # Named adjoints and partial products the gradients read, in computation order.
    statements: tuple[Assignment, ...] = ()


@dataclass(frozen=True)
class BackwardPlan:
    """The scheduled backward and what it reads from the forward."""

    prelude: tuple[GuardedBlock, ...]
    outputs: tuple[OutputBackward, ...]
    saved_tensors: tuple[sympy.Symbol, ...]
    saved_numbers: tuple[Input, ...]
    saved_shapes: tuple[Input, ...]


@dataclass(frozen=True)
class JvpPlan:
    """The scheduled jvp: its statements, each output's tangent, and what it reads."""

    # The tangent parameter of each input, in input order (None: never differentiated).
    tangents: tuple[sympy.Symbol | None, ...]
    statements: tuple[Assignment, ...]
    outputs: tuple[sympy.Expr | None, ...]
    saved_tensors: tuple[sympy.Symbol, ...]
    saved_numbers: tuple[Input, ...]
