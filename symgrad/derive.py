"""Differentiate a spec: reverse mode over the forward's DAG, then plan the backward.

The forward is a list of assignments (the `where` intermediates, common subexpressions
and outputs). For each output, one reverse sweep seeded with that output's incoming
gradient walks this DAG from the end: inside each assignment it propagates adjoints
through the expression tree with local derivative rules, and between assignments it
hands the accumulated adjoint of an intermediate to the assignment that defines it.
Each sweep costs a constant factor of the forward, so the backward stays proportional
to the forward however large the formula is; no unbounded `sympy.simplify` is run.

Note [What the backward saves]: after the sweep, every subexpression equal to a value of
the forward is replaced by that value's name. The backward may then read tensor inputs
and outputs, which are saved with `save_for_backward`; numbers, which are stored on ctx;
and intermediates, which it recomputes from those. Saving an intermediate computed in
the forward would break double backward (it carries no graph), so none is saved.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import sympy

from symgrad import functions
from symgrad.model import Input, Output, Spec


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
    # Temporaries only this contribution uses, computed inside its guard.
    statements: tuple[Assignment, ...]
    # grad_output times d output / d input, in the shape of the output.
    expr: sympy.Expr


@dataclass(frozen=True)
class OutputBackward:
    """The part of the backward driven by one output's incoming gradient."""

    output: Output
    # The symbol of the incoming gradient (`grad_y`).
    grad: sympy.Symbol
    # Temporaries shared by the gradients of several inputs.
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
    # Forward values the backward recomputes, guarded by the inputs that need them.
    recomputed: tuple[GuardedBlock, ...]
    backward: tuple[OutputBackward, ...]
    # d output / d input for the docstring, keyed by (output name, input name).
    partials: Mapping[tuple[str, str], sympy.Expr]
    # Every symbol that stands for a tensor (inputs, values, gradients, temporaries).
    tensor_symbols: frozenset[sympy.Symbol]
    # Every name the generated code uses, so emitters can pick fresh ones.
    names: frozenset[str]


class Namer:
    """Hands out names that collide with nothing the user declared or we already made."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)
        self.counter = itertools.count()

    def fresh(self, base: str) -> str:
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def temporary(self) -> sympy.Symbol:
        while True:
            name = f"_t{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return sympy.Symbol(name, real=True)

    def temporaries(self) -> Iterator[sympy.Symbol]:
        while True:
            yield self.temporary()


def derive(spec: Spec) -> Derived:
    """Differentiate `spec` and plan its backward."""
    namer = Namer(_declared_names(spec))
    forward = _forward_assignments(spec, namer)
    outputs = {o.symbol for o in spec.outputs}
    intermediates = [a for a in forward if a.target not in outputs]
    differentiable = {i.symbol for i in spec.differentiable_inputs}
    known_values = _known_values(spec, forward)

    sweeps: list[tuple[Output, sympy.Symbol, dict[Input, sympy.Expr]]] = []
    for output, assignment in zip(spec.outputs, _output_assignments(spec, forward), strict=True):
        grad = sympy.Symbol(namer.fresh(f"grad_{output.name}"), real=True)
        adjoints = _reverse_sweep(assignment.expr, grad, intermediates, differentiable)
        gradients = {
            i: _simplify_bounded(_reuse_forward_values(adjoints[i.symbol], known_values))
            for i in spec.differentiable_inputs
            if adjoints.get(i.symbol, 0) != 0
        }
        sweeps.append((output, grad, gradients))

    backward = tuple(_plan_output_backward(o, g, grads, namer) for o, g, grads in sweeps)
    needed = _free_symbols_of_backward(backward)
    recomputed = _plan_recomputation(intermediates, needed, backward)
    reads = needed | _free_symbols_of_blocks(recomputed)
    saved_tensors = tuple(
        s
        for s in [*(i.symbol for i in spec.tensor_inputs), *(o.symbol for o in spec.outputs)]
        if s in reads
    )
    saved_numbers = tuple(i for i in spec.inputs if not i.is_tensor and i.symbol in reads)
    saved_shapes = tuple(
        i
        for i in spec.differentiable_inputs
        if i.symbol not in saved_tensors and any(_uses_input(b, i) for b in backward)
    )
    tensors = _tensor_symbols(spec, forward, backward, recomputed)
    declared = {i.symbol for i in spec.intermediates}
    temporaries = {a.target: a.expr for a in intermediates if a.target not in declared}
    partials = _partials(sweeps, temporaries)
    return Derived(
        spec=spec,
        forward=forward,
        saved_tensors=saved_tensors,
        saved_numbers=saved_numbers,
        saved_shapes=saved_shapes,
        recomputed=recomputed,
        backward=backward,
        partials=partials,
        tensor_symbols=frozenset(tensors),
        names=frozenset(namer.taken),
    )


def _declared_names(spec: Spec) -> list[str]:
    return [
        spec.name,
        spec.module,
        "ctx",
        "torch",
        "math",
        *(i.name for i in spec.inputs),
        *(i.name for i in spec.intermediates),
        *(o.name for o in spec.outputs),
    ]


def _forward_assignments(spec: Spec, namer: Namer) -> tuple[Assignment, ...]:
    """The forward's statements, with subexpressions repeated across them named once."""
    statements = [Assignment(i.symbol, i.expr) for i in spec.intermediates]
    statements += [Assignment(o.symbol, o.expr) for o in spec.outputs]
    temporaries, reduced = _cse([s.expr for s in statements], namer)
    pending = list(temporaries)
    forward: list[Assignment] = []
    for statement, expr in zip(statements, reduced, strict=True):
        used = expr.free_symbols
        # Emit each temporary just before the first statement that needs it.
        needed = _closure(used, pending)
        forward += [a for a in pending if a.target in needed]
        pending = [a for a in pending if a.target not in needed]
        forward.append(Assignment(statement.target, expr))
    return tuple(forward)


def _closure(used: set[sympy.Basic], assignments: Sequence[Assignment]) -> set[sympy.Basic]:
    """The targets in `assignments` that `used` depends on, directly or not."""
    needed: set[sympy.Basic] = set()
    frontier = set(used)
    for assignment in reversed(assignments):
        if assignment.target in frontier:
            needed.add(assignment.target)
            frontier |= assignment.expr.free_symbols
    return needed


def _cse(exprs: Sequence[sympy.Expr], namer: Namer) -> tuple[list[Assignment], list[sympy.Expr]]:
    """Name the subexpressions that occur more than once across `exprs`."""
    replacements, reduced = sympy.cse(list(exprs), symbols=namer.temporaries(), order="none")
    return [Assignment(t, e) for t, e in replacements], list(reduced)


def _output_assignments(spec: Spec, forward: Sequence[Assignment]) -> list[Assignment]:
    by_target = {a.target: a for a in forward}
    return [by_target[o.symbol] for o in spec.outputs]


def _known_values(spec: Spec, forward: Sequence[Assignment]) -> dict[sympy.Basic, sympy.Basic]:
    """Map each forward expression to the name holding its value (Note [What the backward saves]).

    An output that merely renames an intermediate (`mean: p`) takes over its
    expressions, so the backward reads the saved output instead of recomputing.
    """
    inputs = {i.symbol for i in spec.inputs}
    values: dict[sympy.Basic, sympy.Basic] = {}
    for assignment in forward:
        if assignment.expr not in inputs and not assignment.expr.is_Number:
            values.setdefault(assignment.expr, assignment.target)
    for expr, target in values.items():
        while target in values:
            target = values[target]
        values[expr] = target
    return values


def _reuse_forward_values(
    expr: sympy.Expr, values: Mapping[sympy.Basic, sympy.Basic]
) -> sympy.Expr:
    """Replace subexpressions equal to forward values, whole or as part of a sum or product.

    One bottom-up pass: a sum or product whose arguments include all the arguments of a
    known sum or product (E*exp(-g*t)*w contains E*exp(-g*t)) has them replaced by its
    name. Candidates are found through an index by argument, so the pass stays linear.
    """
    by_argument: dict[sympy.Basic, list[sympy.Basic]] = {}
    for value in values:
        if isinstance(value, (sympy.Add, sympy.Mul)):
            by_argument.setdefault(value.args[0], []).append(value)
    memo: dict[sympy.Basic, sympy.Basic] = {}

    def visit(node: sympy.Basic) -> sympy.Basic:
        if node in memo:
            return memo[node]
        result = node
        if node.args:
            args = [visit(arg) for arg in node.args]
            if any(new is not old for new, old in zip(args, node.args, strict=True)):
                result = node.func(*args)
        if result in values:
            result = values[result]
        elif isinstance(result, (sympy.Add, sympy.Mul)):
            result = _replace_part(result, values, by_argument)
        memo[node] = result
        return result

    return visit(expr)


def _replace_part(
    node: sympy.Basic,
    values: Mapping[sympy.Basic, sympy.Basic],
    by_argument: Mapping[sympy.Basic, list[sympy.Basic]],
) -> sympy.Basic:
    """Replace the arguments of `node` that make up known values of the same kind.

    Repeats until nothing matches, since one replacement can complete another
    (E*exp(-g*t)*cos(p)**n -> envelope*cos(p)**n -> u). Each replacement removes at least
    one argument, so this ends.
    """
    remaining = list(node.args)
    replaced = True
    while replaced:
        replaced = False
        for arg in _candidate_keys(remaining):
            for value in by_argument.get(arg, ()):
                if value.func is not node.func:
                    continue
                rest = _without(remaining, value.args, split_powers=node.func is sympy.Mul)
                if rest is not None:
                    remaining = [*rest, values[value]]
                    replaced = True
                    break
            if replaced:
                break
    return node if remaining == list(node.args) else node.func(*remaining)


def _candidate_keys(args: list[sympy.Basic]) -> list[sympy.Basic]:
    """The arguments, and the bases of their positive integer powers."""
    keys = list(args)
    keys += [a.base for a in args if _is_positive_integer_power(a)]
    return keys


def _is_positive_integer_power(expr: sympy.Basic) -> bool:
    return isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 1


def _without(
    items: list[sympy.Basic], parts: tuple[sympy.Basic, ...], split_powers: bool
) -> list[sympy.Basic] | None:
    """`items` less the multiset `parts`, or None if they are not all there.

    In a product (`split_powers`), a factor may also come out of an integer power x**k.
    """
    pool = list(items)
    for part in parts:
        if part in pool:
            pool.remove(part)
            continue
        powers = (p for p in pool if _is_positive_integer_power(p) and p.base == part)
        power = next(powers, None) if split_powers else None
        if power is None:
            return None
        pool[pool.index(power)] = power.base ** (power.exp - 1)
    return pool


# Gradients larger than this (in sympy operations) skip the optional simplification.
_SIMPLIFY_MAX_OPS = 400


def _simplify_bounded(expr: sympy.Expr) -> sympy.Expr:
    """Pull out common factors when that makes the expression smaller; never unbounded."""
    size = sympy.count_ops(expr)
    if size > _SIMPLIFY_MAX_OPS:
        return expr
    candidate = sympy.factor_terms(expr)
    return candidate if sympy.count_ops(candidate) < size else expr


def _reverse_sweep(
    output_expr: sympy.Expr,
    seed: sympy.Expr,
    intermediates: Sequence[Assignment],
    differentiable: set[sympy.Symbol],
) -> dict[sympy.Basic, sympy.Expr]:
    """Adjoints of every symbol for one output, by reverse mode over the forward DAG."""
    active = set(differentiable)
    for assignment in intermediates:
        if assignment.expr.free_symbols & active:
            active.add(assignment.target)
    adjoints: dict[sympy.Basic, sympy.Expr] = {}
    _backpropagate(output_expr, seed, active, adjoints)
    for assignment in reversed(intermediates):
        adjoint = adjoints.pop(assignment.target, None)
        if adjoint is not None and assignment.target in active:
            _backpropagate(assignment.expr, adjoint, active, adjoints)
    return adjoints


def _backpropagate(
    expr: sympy.Expr,
    seed: sympy.Expr,
    active: set[sympy.Symbol],
    adjoints: dict[sympy.Basic, sympy.Expr],
) -> None:
    """Add seed * d expr / d symbol into `adjoints` for every active symbol in `expr`."""
    order = _active_nodes(expr, active)
    if not order:
        return
    node_adjoints: dict[sympy.Basic, sympy.Expr] = {expr: seed}
    for node in reversed(order):
        adjoint = node_adjoints.pop(node, None)
        if adjoint is None:
            continue
        if node.is_Symbol:
            adjoints[node] = adjoints.get(node, sympy.Integer(0)) + adjoint
            continue
        for index, arg in enumerate(node.args):
            if arg in order:
                contribution = adjoint * _local_partial(node, index)
                node_adjoints[arg] = node_adjoints.get(arg, sympy.Integer(0)) + contribution


def _active_nodes(expr: sympy.Expr, active: set[sympy.Symbol]) -> dict[sympy.Basic, None]:
    """The distinct subtrees of `expr` that depend on an active symbol, children first."""
    order: dict[sympy.Basic, None] = {}
    visited: set[sympy.Basic] = set()
    stack: list[tuple[sympy.Basic, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if node in active or any(arg in order for arg in node.args):
                order[node] = None
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        stack.extend((arg, False) for arg in reversed(node.args))
    return order


def _local_partial(node: sympy.Basic, index: int) -> sympy.Expr:
    """d node / d node.args[index], holding the other arguments fixed."""
    if isinstance(node, sympy.Add):
        return sympy.Integer(1)
    if isinstance(node, sympy.Mul):
        return sympy.Mul(*node.args[:index], *node.args[index + 1 :])
    if isinstance(node, sympy.Pow):
        base, exponent = node.args
        if index == 0:
            return exponent * base ** (exponent - 1)
        return node * functions.call("log", base)
    if isinstance(node, functions.ElementwiseFunction):
        return node.fdiff(index + 1)
    raise TypeError(f"symgrad has no derivative rule for {type(node).__name__}: {node}")


def _plan_output_backward(
    output: Output, grad: sympy.Symbol, gradients: Mapping[Input, sympy.Expr], namer: Namer
) -> OutputBackward:
    """Share work between the input gradients of one output, guarded by need."""
    inputs = list(gradients)
    temporaries, reduced = _cse([gradients[i] for i in inputs], namer)
    users = _users(temporaries, list(zip(inputs, reduced, strict=True)))
    shared = _group_by_users([a for a in temporaries if len(users[a.target]) > 1], users, inputs)
    input_gradients = tuple(
        InputGradient(
            i,
            tuple(a for a in temporaries if users[a.target] == (i,)),
            expr,
        )
        for i, expr in zip(inputs, reduced, strict=True)
    )
    return OutputBackward(output, grad, shared, input_gradients)


def _users(
    temporaries: Sequence[Assignment], consumers: Sequence[tuple[Input, sympy.Expr]]
) -> dict[sympy.Basic, tuple[Input, ...]]:
    """For each temporary, the inputs whose gradient needs it, in input order."""
    order = {i: n for n, (i, _) in enumerate(consumers)}
    users: dict[sympy.Basic, set[Input]] = {a.target: set() for a in temporaries}
    for consumer, expr in consumers:
        for symbol in expr.free_symbols & users.keys():
            users[symbol].add(consumer)
    for assignment in reversed(temporaries):
        for symbol in assignment.expr.free_symbols & users.keys():
            users[symbol] |= users[assignment.target]
    return {t: tuple(sorted(u, key=order.__getitem__)) for t, u in users.items()}


def _group_by_users(
    statements: Sequence[Assignment],
    users: Mapping[sympy.Basic, tuple[Input, ...]],
    inputs: Sequence[Input],
) -> tuple[GuardedBlock, ...]:
    """Group statements into blocks with one guard each, keeping dependencies in order.

    A statement's users include the users of everything that reads it, so sorting by
    decreasing number of users (stably) never moves a statement after its readers.
    """
    ordered = sorted(statements, key=lambda a: -len(users[a.target]))
    blocks: list[GuardedBlock] = []
    for guard, group in itertools.groupby(ordered, key=lambda a: users[a.target]):
        blocks.append(GuardedBlock(guard, tuple(group)))
    return tuple(blocks)


def _free_symbols_of_backward(backward: Sequence[OutputBackward]) -> set[sympy.Basic]:
    symbols: set[sympy.Basic] = set()
    for part in backward:
        symbols |= _free_symbols_of_blocks(part.shared)
        for gradient in part.gradients:
            symbols |= gradient.expr.free_symbols
            symbols |= _free_symbols_of_statements(gradient.statements)
    return symbols


def _free_symbols_of_blocks(blocks: Iterable[GuardedBlock]) -> set[sympy.Basic]:
    symbols: set[sympy.Basic] = set()
    for block in blocks:
        symbols |= _free_symbols_of_statements(block.statements)
    return symbols


def _free_symbols_of_statements(statements: Iterable[Assignment]) -> set[sympy.Basic]:
    symbols: set[sympy.Basic] = set()
    for statement in statements:
        symbols |= statement.expr.free_symbols
    return symbols


def _plan_recomputation(
    intermediates: Sequence[Assignment],
    needed: set[sympy.Basic],
    backward: Sequence[OutputBackward],
) -> tuple[GuardedBlock, ...]:
    """The forward intermediates the backward reads, each guarded by the inputs that need it."""
    inputs: list[Input] = []
    users: dict[sympy.Basic, set[Input]] = {}
    for part in backward:
        for gradient in part.gradients:
            if gradient.input not in inputs:
                inputs.append(gradient.input)
            reads = gradient.expr.free_symbols | _free_symbols_of_statements(gradient.statements)
            for block in part.shared:
                if gradient.input in block.inputs:
                    reads |= _free_symbols_of_statements(block.statements)
            for symbol in reads:
                users.setdefault(symbol, set()).add(gradient.input)
    kept = [a for a in intermediates if a.target in _closure(needed, intermediates)]
    for assignment in reversed(kept):
        for symbol in assignment.expr.free_symbols:
            users.setdefault(symbol, set()).update(users.get(assignment.target, set()))
    order = {i: n for n, i in enumerate(inputs)}
    by_users = {a.target: tuple(sorted(users[a.target], key=order.__getitem__)) for a in kept}
    return _group_by_users(kept, by_users, inputs)


def _uses_input(part: OutputBackward, item: Input) -> bool:
    return any(g.input == item for g in part.gradients)


def _tensor_symbols(
    spec: Spec,
    forward: Sequence[Assignment],
    backward: Sequence[OutputBackward],
    recomputed: Sequence[GuardedBlock],
) -> set[sympy.Basic]:
    """Symbols holding tensors: tensor inputs and anything computed from a tensor."""
    tensors: set[sympy.Basic] = {i.symbol for i in spec.tensor_inputs}
    tensors |= {part.grad for part in backward}
    statements: list[Assignment] = list(forward)
    for block in recomputed:
        statements += block.statements
    for part in backward:
        for block in part.shared:
            statements += block.statements
        for gradient in part.gradients:
            statements += gradient.statements
    for statement in statements:
        if statement.expr.free_symbols & tensors:
            tensors.add(statement.target)
    return tensors


def _partials(
    sweeps: Sequence[tuple[Output, sympy.Symbol, Mapping[Input, sympy.Expr]]],
    temporaries: Mapping[sympy.Basic, sympy.Expr],
) -> dict[tuple[str, str], sympy.Expr]:
    """d output / d input with symgrad's temporaries expanded, for the docstring."""
    partials = {}
    for output, grad, gradients in sweeps:
        for item, expr in gradients.items():
            partial = expr.xreplace({grad: sympy.Integer(1)})
            while partial.free_symbols & temporaries.keys():
                partial = partial.xreplace(temporaries)
            partials[(output.name, item.name)] = partial
    return partials
