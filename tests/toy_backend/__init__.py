"""A toy backend: the forward and backward of a spec as plain text, `<module>.txt`.

It exists to show what a backend is and to prove that one needs nothing outside its
folder and `registry.register`: a printer (`ToyPrinter`), a typed context
(`ToyContext`), and a template (`templates/function.txt.jinja`). It reads the IR
(`symgrad.ad.ir.Derived`) and changes nothing upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
import sympy
from sympy.printing.str import StrPrinter

from symgrad.ad.ir import Assignment, Derived, GuardedBlock
from symgrad.backends.base import Backend, GeneratedFiles, Provenance


class ToyPrinter(StrPrinter):
    """sympy's str form; language functions print under their own names."""

    def _print_Where(self, expr: sympy.Basic) -> str:  # noqa: N802
        return "where({}, {}, {})".format(*(self._print(arg) for arg in expr.args))


@dataclass(frozen=True)
class Block:
    """Statements that run when any of `needs` wants a gradient."""

    needs: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ToyContext:
    """Everything the template lays out, already printed."""

    version: str
    # The command that writes the file again (None for a spec that is no file).
    command: str | None
    source: str
    name: str
    inputs: tuple[str, ...]
    forward: tuple[str, ...]
    saved: tuple[str, ...]
    prelude: tuple[Block, ...]
    # Per output: its incoming gradient's name and the blocks that use it.
    backward: tuple[tuple[str, tuple[Block, ...]], ...]


def _line(statement: Assignment, printer: ToyPrinter) -> str:
    return f"{printer.doprint(statement.target)} = {printer.doprint(statement.expr)}"


def _block(block: GuardedBlock, printer: ToyPrinter) -> Block:
    needs = " or ".join(i.name for i in block.inputs)
    return Block(needs, tuple(_line(s, printer) for s in block.statements))


def context(derived: Derived, provenance: Provenance) -> ToyContext:
    """Print every statement of the IR; the template only lays them out."""
    printer = ToyPrinter()
    backward = []
    for part in derived.backward:
        blocks = [_block(b, printer) for b in part.shared]
        for gradient in part.gradients:
            lines = [_line(s, printer) for s in gradient.statements]
            lines.append(f"grad_{gradient.input.name} += {printer.doprint(gradient.expr)}")
            blocks.append(Block(gradient.input.name, tuple(lines)))
        backward.append((part.grad.name, tuple(blocks)))
    spec = derived.spec
    return ToyContext(
        version=provenance.version,
        command=provenance.command,
        source=spec.source,
        name=spec.name,
        inputs=tuple(i.name for i in spec.inputs),
        forward=tuple(_line(a, printer) for a in derived.forward),
        saved=tuple(printer.doprint(s) for s in derived.saved_tensors),
        prelude=tuple(_block(b, printer) for b in derived.prelude),
        backward=tuple(backward),
    )


_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(derived: Derived, provenance: Provenance) -> GeneratedFiles:
    """The spec's forward and backward as `<module>.txt`."""
    text = _TEMPLATES.get_template("function.txt.jinja").render(ctx=context(derived, provenance))
    return GeneratedFiles(derived.spec.module, {f"{derived.spec.module}.txt": text})


BACKEND = Backend(name="toy", description="forward and backward as plain text", render=render)
