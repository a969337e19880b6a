"""The in-place variant of a Function: the output overwrites the first tensor input.

Note [In-place variants]: `inplace: true` asks for `<module>_`, which writes its output
into its first tensor input `x` and returns it, as torch's own `sigmoid_` or `relu_` do.
Once the forward has run, `x` holds the output, so the backward may read the output
and the other inputs but never the old `x`. Derivatives torch writes from the result
(exp, sigmoid, tanh) already read the output (symgrad.ad.reuse). The conditions of
kinks are carried over where the output keeps them: relu(x) > 0 exactly where x > 0,
and leaky_relu(x, a) with a > 0 has the sign of x. Anything else that reads `x` is
refused at generation, with the reason, never computed from a stale value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NoReturn

import sympy
from sympy.core.relational import Relational

from symgrad.ad.ir import Assignment, Derived, GuardedBlock, InputGradient, OutputBackward
from symgrad.errors import SpecError
from symgrad.frontend.model import Input, Spec
from symgrad.language import activations, piecewise, reductions

# Comparisons with 0 that each kink's output answers as its input would: relu(x) is > 0
# exactly where x is, and <= 0 exactly where x is (relu(x) >= 0 always, so not >= or <).
_RELU_KEEPS = (sympy.StrictGreaterThan, sympy.LessThan)
_SIGN_KEEPS = (
    sympy.StrictGreaterThan,
    sympy.GreaterThan,
    sympy.StrictLessThan,
    sympy.LessThan,
)


def derive_inplace(derived: Derived) -> Derived:
    """The derivation of the in-place variant: the same forward, a backward without `x`.

    Raises a SpecError at the spec's `inplace` key saying why there can be none.
    """
    spec = derived.spec
    x = _overwritten(spec)
    if len(spec.outputs) != 1:
        _refuse(spec, "it has exactly one output, which overwrites the input")
    (output,) = spec.outputs
    definitions = {a.target: a.expr for a in derived.forward}
    if _reads_reduction(output.symbol, definitions):
        _refuse(spec, f"{output.name} is a reduction, which cannot overwrite {x.name}")
    if derived.residuals or derived.saved_values:
        _refuse(spec, f"the backward reads forward values besides {output.name}")
    if x.symbol in derived.saved_tensors:
        rewrite = _through_output(x.symbol, output.symbol, definitions[output.symbol])
        derived = _rewritten(derived, rewrite)
    reads = _backward_reads(derived)
    if x.symbol in reads:
        _refuse(
            spec,
            f"the backward reads {x.name}, which `{spec.module}_` overwrites "
            f"(only the output {output.name} and the other inputs are left to it)",
        )
    saved = {s for s in derived.saved_tensors if s != x.symbol}
    if output.symbol in reads:
        saved.add(output.symbol)
    order = [i.symbol for i in spec.tensor_inputs] + [output.symbol]
    # The backward still sums x's gradient to x's shape, which overwriting keeps.
    shapes = set(derived.saved_shapes)
    if x.differentiable and x.symbol in derived.saved_tensors:
        shapes.add(x)
    return dataclasses.replace(
        derived,
        saved_tensors=tuple(s for s in order if s in saved),
        saved_shapes=tuple(i for i in spec.inputs if i in shapes),
        jvp=None,
    )


def _overwritten(spec: Spec) -> Input:
    """The first tensor input, which the variant overwrites."""
    if not spec.tensor_inputs:
        _refuse(spec, "there is no tensor input to overwrite")
    return overwritten(spec)


def overwritten(spec: Spec) -> Input:
    """The input the in-place variant overwrites: the first tensor input."""
    return spec.tensor_inputs[0]


def variant_names(spec: Spec) -> tuple[str, str]:
    """The in-place variant's class and function names, as torch names them (`relu_`)."""
    return f"{spec.name}_", f"{spec.module}_"


def variant_doc(spec: Spec) -> str:
    """The in-place variant's docstring, in every target."""
    return (
        f"`{spec.module}` in place: overwrites `{overwritten(spec).name}` with the result "
        "and returns it (the backward reads the result, not the old value)."
    )


def _refuse(spec: Spec, reason: str) -> NoReturn:
    assert spec.inplace is not None
    raise SpecError(spec.inplace, f"no in-place variant: {reason}", "inplace")


def _reads_reduction(symbol: sympy.Basic, definitions: dict[sympy.Basic, sympy.Expr]) -> bool:
    """Whether the value of `symbol` passes through a reduction (so it is not x's shape)."""
    frontier, seen = [symbol], set()
    while frontier:
        node = frontier.pop()
        if node in seen:
            continue
        seen.add(node)
        expr = definitions.get(node)
        if expr is None:
            continue
        if expr.atoms(reductions.Reduction, reductions.Normalization):
            return True
        frontier += list(expr.free_symbols)
    return False


def _through_output(
    x: sympy.Symbol, y: sympy.Symbol, definition: sympy.Expr
) -> Callable[[sympy.Expr], sympy.Expr]:
    """A rewrite of comparisons of `x` with 0 into the same comparisons of `y = definition`.

    Only those the output answers as the input does (Note [In-place variants]).
    """
    keeps: tuple[type[Relational], ...] = ()
    if isinstance(definition, piecewise.Relu) and definition.args[0] == x:
        keeps = _RELU_KEEPS
    elif isinstance(definition, activations.LeakyRelu) and definition.args[0] == x:
        keeps = _SIGN_KEEPS if definition.args[1].is_positive else ()

    def carry(node: sympy.Basic) -> sympy.Basic:
        if isinstance(node, keeps) and node.lhs == x and node.rhs == 0:
            return type(node)(y, 0)
        if isinstance(node, keeps) and node.rhs == x and node.lhs == 0:
            return type(node)(0, y)
        return node

    def rewrite(expr: sympy.Expr) -> sympy.Expr:
        rewritten: sympy.Expr = expr.replace(lambda n: isinstance(n, Relational), carry)
        return rewritten

    return rewrite


def _rewritten(derived: Derived, rewrite: Callable[[sympy.Expr], sympy.Expr]) -> Derived:
    """`derived` with `rewrite` applied to every expression of the backward."""

    def statements(items: tuple[Assignment, ...]) -> tuple[Assignment, ...]:
        return tuple(Assignment(a.target, rewrite(a.expr)) for a in items)

    def block(item: GuardedBlock) -> GuardedBlock:
        return GuardedBlock(item.inputs, statements(item.statements))

    def part(item: OutputBackward) -> OutputBackward:
        gradients = tuple(
            InputGradient(g.input, statements(g.statements), rewrite(g.expr))
            for g in item.gradients
        )
        return OutputBackward(item.output, item.grad, tuple(map(block, item.shared)), gradients)

    return dataclasses.replace(
        derived,
        prelude=tuple(map(block, derived.prelude)),
        backward=tuple(map(part, derived.backward)),
    )


def _backward_reads(derived: Derived) -> set[sympy.Basic]:
    """The symbols the backward reads that it does not compute itself."""
    statements = [a for b in derived.prelude for a in b.statements]
    exprs = []
    for part in derived.backward:
        statements += [a for b in part.shared for a in b.statements]
        for gradient in part.gradients:
            statements += gradient.statements
            exprs.append(gradient.expr)
    exprs += [a.expr for a in statements]
    defined = {a.target for a in statements}
    return set().union(*(e.free_symbols for e in exprs)) - defined
