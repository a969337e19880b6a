"""The form of a Function's statements, shared: forward values, guarded backward blocks.

Which forward value is returned as a view, detached or copied, and how the backward's
statements fall into blocks guarded by the inputs that need them, are the same choices
in every backend (Note [Forms and spellings] in symgrad.backends.forms.arithmetic). A
backend gives its `StatementSpelling`: how a statement ends and how a guard reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from symgrad.ad.ir import Assignment, Derived, GuardedBlock, OutputBackward
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.frontend.model import Input


@dataclass(frozen=True)
class Block:
    """Statements that run under one guard (`if need_a or need_b:`)."""

    guard: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class OutputPart:
    """The blocks that run when one output's incoming gradient `grad` is given."""

    grad: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class StatementSpelling:
    """How a backend writes the backward's statements."""

    printer: ArithmeticForms
    # The guard of a block that serves these inputs (`need_a or need_b`).
    guard: Callable[[Sequence[Input]], str]
    # Each receiving input's gradient variable, by input name.
    grad: Mapping[str, str]
    # The helper that adds a part to a gradient that may still be None.
    accumulate: str
    # What ends a statement: "" in Python, ";" in C++.
    end: str = ""

    def statement(self, target: str, value: str) -> str:
        return f"{target} = {value}{self.end}"

    def assignment(self, assignment: Assignment) -> str:
        printer = self.printer
        return self.statement(printer.doprint(assignment.target), printer.doprint(assignment.expr))


def forward_value(assignment: Assignment, derived: Derived, printer: ArithmeticForms) -> str:
    """The value a forward statement assigns: an output that is a tensor input as a view
    of it, a non-differentiable output that renames a value detached, a residual that
    renames a value as its own copy.

    torch refuses to save an input that a Function returns as-is; a view is cheap. A
    renamed value may be another output or a residual too: marking the one tensor
    non-differentiable would cut that one's gradient (so it is detached, not copied),
    and one tensor returned twice breaks forward AD (so a residual, small, is copied).
    """
    name: str = printer.doprint(assignment.expr)
    # By the printed name: a broadcast the printer knows to be a no-op prints as the input.
    if name in {printer.doprint(i.symbol) for i in derived.spec.tensor_inputs}:
        return f"{name}.view_as({name})"
    constant = {o.symbol for o in derived.spec.outputs if not o.differentiable}
    if assignment.target in constant and assignment.expr.is_Symbol:
        return f"{name}.detach()"
    if assignment.target in {o.symbol for o in derived.residuals} and assignment.expr.is_Symbol:
        return f"{name}.clone()"
    return name


def backward_blocks(
    derived: Derived, spelling: StatementSpelling
) -> tuple[tuple[Block, ...], tuple[OutputPart, ...]]:
    """The recomputation's blocks and each output's part of the backward.

    With one output its shared work joins the recomputation under the same guards; with
    several, each output's part adds to the input gradients (accumulated).
    """
    several = len(derived.backward) > 1
    prelude = [_block(b, spelling) for b in derived.prelude]
    backward = [_output_backward(p, spelling, several) for p in derived.backward]
    if not several and backward:
        prelude = merge_blocks(prelude + list(backward[0].blocks))
        backward = [OutputPart(backward[0].grad, ())]
    return tuple(prelude), tuple(backward)


def _block(block: GuardedBlock, spelling: StatementSpelling) -> Block:
    lines = tuple(spelling.assignment(a) for a in block.statements)
    return Block(spelling.guard(block.inputs), lines)


def _output_backward(
    part: OutputBackward, spelling: StatementSpelling, several: bool
) -> OutputPart:
    """The guarded blocks that add one output's contribution to each input gradient."""
    blocks = [_block(b, spelling) for b in part.shared]
    for gradient in part.gradients:
        target = spelling.grad[gradient.input.name]
        term = spelling.printer.doprint(gradient.expr)
        if several:
            term = f"{spelling.accumulate}({target}, {term})"
        lines = tuple(spelling.assignment(a) for a in gradient.statements)
        last = spelling.statement(target, term)
        blocks.append(Block(spelling.guard([gradient.input]), (*lines, last)))
    return OutputPart(spelling.printer.doprint(part.grad), tuple(merge_blocks(blocks)))


def merge_blocks(blocks: list[Block]) -> list[Block]:
    """Join neighbouring blocks that have the same guard."""
    merged: list[Block] = []
    for block in blocks:
        if merged and merged[-1].guard == block.guard:
            merged[-1] = dataclasses.replace(merged[-1], lines=merged[-1].lines + block.lines)
        else:
            merged.append(block)
    return merged
