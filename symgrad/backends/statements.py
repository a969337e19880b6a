"""What the backends share: the IR's statements in order and the facts about them.

Which temporaries hold conditions (boolean tensors), which tensors have a reduced shape,
the reading-order names of symgrad's temporaries, blocks merged under one guard and the
comment naming saved values do not depend on the language printed.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Mapping

import sympy

from symgrad.ad.ir import Assignment, Derived
from symgrad.language import reductions
from symgrad.language.indexing import IndexSymbol
from symgrad.language.piecewise import is_condition


def backward_statements(derived: Derived) -> list[Assignment]:
    """The backward's statements (prelude, shared, per gradient), in the order it defines them."""
    statements = [a for block in derived.prelude for a in block.statements]
    for part in derived.backward:
        for block in part.shared:
            statements += block.statements
        for gradient in part.gradients:
            statements += gradient.statements
    return statements


def all_statements(derived: Derived) -> list[Assignment]:
    """Every statement of the module, in the order it defines them."""
    statements = [*derived.forward, *derived.shape_facts, *backward_statements(derived)]
    if derived.jvp is not None:
        statements += derived.jvp.statements
    return statements


def fact_shapes(derived: Derived) -> list[tuple[Assignment, reductions.Shape | None]]:
    """Each shape fact with the shape tree of the value it measures."""
    definitions = {a.target: a.expr for a in derived.forward}
    tensors = {i.symbol for i in derived.spec.tensor_inputs}
    return [
        (fact, reductions.shape_of(fact.expr.args[0], definitions, tensors))
        for fact in derived.shape_facts
    ]


def small_symbols(derived: Derived) -> frozenset[sympy.Basic]:
    """Tensors of a reduced shape: residuals, gradients of reductions, and values of them."""
    small: set[sympy.Basic] = {o.symbol for o in derived.residuals}
    # The incoming gradient of a reduced output has the output's reduced shape.
    definitions = {a.target: a.expr for a in derived.forward}
    small |= {
        part.grad
        for part in derived.backward
        if isinstance(definitions.get(part.output.symbol), reductions.Reduction)
    }
    tensors = derived.tensor_symbols
    for statement in all_statements(derived):
        read = statement.expr.free_symbols & tensors
        reduced = isinstance(statement.expr, (reductions.Reduction, reductions.SumTo))
        if reduced or (read and read <= small):
            small.add(statement.target)
    return frozenset(small)


def condition_temporaries(derived: Derived) -> dict[sympy.Basic, sympy.Basic]:
    """Statements whose value is a condition (a boolean tensor), by target."""
    return {s.target: s.expr for s in all_statements(derived) if is_condition(s.expr)}


def _value_symbols(expr: sympy.Basic) -> set[sympy.Basic]:
    """The free symbols of `expr` but those an index reader reads as its index (a gather's,
    a segment sum's): an index is int64, whatever temporary holds it."""
    found: set[sympy.Basic] = set()
    pending = [expr]
    while pending:
        node = pending.pop()
        if node.is_Symbol:
            found.add(node)
            continue
        index = getattr(node, "index", None)
        pending += [arg for arg in node.args if index is None or arg is not index]
    return found


def value_tensors(
    args: Iterable[sympy.Basic],
    tensors: frozenset[sympy.Basic] | set[sympy.Basic],
    conditions: Mapping[sympy.Basic, sympy.Basic],
) -> list[sympy.Basic]:
    """The tensors holding values (never a boolean condition) that `args` read, by name.

    A printed constant beside tensors takes the dtype of one of these. A condition
    temporary stands for the tensors it compares: beside where(c, f0, 1), a constant
    takes the dtype of the values c compares, never c's own bool (which would make 0.25
    True, that is 1), and never an index input's int64 (which would make 1.15 into 1).
    """
    pending: list[sympy.Basic] = [sympy.Tuple(*args)]
    found: set[sympy.Basic] = set()
    seen: set[sympy.Basic] = set()
    while pending and not found:
        compared = []
        for symbol in _value_symbols(pending.pop()) & tensors:
            if symbol not in seen and not isinstance(symbol, IndexSymbol):
                seen.add(symbol)
                if symbol in conditions:
                    compared.append(conditions[symbol])
                else:
                    found.add(symbol)
        pending += compared
    return sorted(found, key=str)


def temporary_names(derived: Derived) -> dict[sympy.Basic, str]:
    """Rename symgrad's temporaries `_t0`, `_t1`, ... in the order the module defines them."""
    statements = all_statements(derived)
    taken = derived.names - {t.name for t in derived.temporaries}
    numbers = (f"_t{n}" for n in itertools.count())
    renames: dict[sympy.Basic, str] = {}
    for statement in statements:
        if statement.target in derived.temporaries and statement.target not in renames:
            renames[statement.target] = next(name for name in numbers if name not in taken)
    return renames


def saved_comment(derived: Derived, width: int) -> tuple[str, ...]:
    """Which forward values the backward reads saved, and why, wrapped for a comment."""
    names = ", ".join(o.name for o in derived.saved_values)
    if derived.spec.save == "memory":
        masks = f", and the conditions it reads as bool masks ({names})" if names else ""
        text = (
            "save: memory: the backward saves only the inputs it reads and reduced-shape "
            f"values{masks}; it recomputes the rest."
        )
    elif not derived.saved_values:
        return ()
    elif derived.spec.save == "speed":
        text = (
            "Saved for the backward, not recomputed (save: speed, which may exceed what "
            f"eager autograd saves): {names}."
        )
    else:
        text = (
            f"Saved for the backward, not recomputed (within what eager autograd saves): {names}."
        )
    return tuple(textwrap.wrap(text, width=width, break_on_hyphens=False))
