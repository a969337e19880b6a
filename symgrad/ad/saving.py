"""Choose the forward values the backward reads saved instead of recomputing them.

Note [Saved values]: by default the backward recomputes every intermediate it reads
from the saved inputs (Note [What the backward saves] in symgrad.ad.schedule), which
costs a second forward. Eager autograd recomputes nothing: it saves every operand and
result its derivative formulas read. symgrad saves forward values too, within the
same memory: the tensors saved (inputs, outputs and values, counted in elements at the
spec's test shapes) never exceed what eager autograd of the written formula saves, and
the values whose recomputation costs most (by the cost table, symgrad.ad.costs) are
chosen first.

A saved value is returned by the forward as an extra, non-differentiable output, which
the public function drops. It carries no graph, so when the backward runs with grad mode
on (double backward), the backward recomputes it from the inputs with plain torch
operations first (`Derived.recompute`); the gradient formulas are the same either way.

Note [Save choices]: the spec's `save:` key moves this trade. `balanced` (the default)
is the budget above. `memory` saves no forward value and no output either: the backward
reads the inputs and the reduced-shape residuals (Note [Residuals] in
symgrad.ad.residuals) and recomputes everything else, like a hand-written Function that
saves its inputs; a condition the backward reads on values it reads nowhere else is saved
as a bool mask instead (Note [Saved masks] in symgrad.ad.masks). `speed` lifts eager's
budget and the floor: every value the backward would recompute is saved (a view aside),
which may hold more than eager autograd does. The floor `MIN_SAVED_COST` is the CPU's
trade (a pass in cache costs less than holding a tensor); on a GPU every elementwise pass
reads and writes memory, and `speed` is the choice there. Balanced lifts the floor for a
value eager autograd holds too whose recomputation takes two passes or more (`passes`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import sympy

from symgrad.ad import costs
from symgrad.ad.ir import Assignment, BackwardPlan, OutputGradients, closure
from symgrad.frontend.domains import broadcast_shapes, default_shape
from symgrad.frontend.model import Spec
from symgrad.language import arg_extrema, functions, piecewise, reductions, views
from symgrad.language.piecewise import is_condition

# Functions whose derivative torch computes from their result (exp' = exp, sigmoid' = s (1 - s)):
# eager autograd saves the result, not the argument.
_SAVES_RESULT = frozenset({"exp", "expm1", "sigmoid", "tanh", "sqrt", "rsqrt", "exp2"})


# A value that costs less than two multiplications (symgrad.ad.costs) to recompute is
# recomputed: saving it would hold a tensor through the backward to spare one cheap pass,
# and such values pushed the backward's peak memory above eager's (focal loss, the
# screened Lennard-Jones term). Unless eager autograd saves that value too and it takes two
# passes or more: each pass writes a fresh full-size temporary, and holding what eager
# holds cannot raise the peak above it (sigmoid(beta * x) in the per-channel swish: its
# recomputation made the backward 1.25x eager's at 1e7 on the CPU, 1.2x on an H200).
MIN_SAVED_COST = 2.0


def eager_saved_elements(spec: Spec) -> float:
    """Elements eager autograd saves for the formula as written, at test shapes (in float32s:
    a bool mask counts a quarter)."""
    weigh = Weights(spec, {i.symbol: i.expr for i in spec.intermediates})
    return sum(weigh(node) * _size(node) for node in _eager_saved(spec, weigh))


def eager_saved_values(spec: Spec) -> frozenset[sympy.Basic]:
    """The tensors eager autograd saves for the formula as written, written out in the inputs."""
    definitions = {i.symbol: i.expr for i in spec.intermediates}
    weigh = Weights(spec, definitions)
    return frozenset(written_out(definitions).get(n, n) for n in _eager_saved(spec, weigh))


def _eager_saved(spec: Spec, weigh: Weights) -> set[sympy.Basic]:
    """The tensors eager autograd saves, each once (a name and the expression it stands for
    are one tensor)."""
    definitions = weigh.definitions
    saved: set[sympy.Basic] = set()
    for expr in [*definitions.values(), *(o.expr for o in spec.outputs)]:
        saved |= _saved_by_eager(expr, weigh.is_tensor, weigh.is_active)
    distinct = {_definition(node, definitions) for node in saved}
    return {node for node in distinct if weigh.is_tensor(node)}


def written_out(definitions: Mapping[sympy.Basic, sympy.Basic]) -> dict[sympy.Basic, sympy.Basic]:
    """Each name's value in the inputs alone (`definitions` in order, each reading earlier ones)."""
    written: dict[sympy.Basic, sympy.Basic] = {}
    for name, expr in definitions.items():
        written[name] = expr.xreplace(written)
    return written


def passes(expr: sympy.Basic) -> int:
    """The torch operations `expr` takes as printed: one per call and per arithmetic step
    (a number factor of -1 in a sum is the subtraction, not a pass of its own)."""
    if expr.is_Atom:
        return 0
    args = expr.args
    if isinstance(expr, sympy.Add):
        inner = [-a if a.could_extract_minus_sign() and a.is_Mul else a for a in args]
        return len(args) - 1 + sum(passes(a) for a in inner)
    if isinstance(expr, sympy.Mul):
        numbers = [a for a in args if a.is_Number]
        return (
            len(args)
            - 1
            + sum(passes(a) for a in args if not a.is_Number)
            + (1 if len(numbers) == len(args) else 0)
        )
    return 1 + sum(passes(a) for a in args)


def _size(node: sympy.Basic) -> float:
    """A saved value's bytes per element over a float32's: a condition is a bool mask."""
    return 0.25 if is_condition(node) else 1.0


def _definition(node: sympy.Basic, definitions: Mapping[sympy.Basic, sympy.Basic]) -> sympy.Basic:
    """The expression a name stands for (through renames); any other node as it is."""
    while node in definitions:
        node = definitions[node]
    return node


def _saved_by_eager(
    expr: sympy.Basic,
    is_tensor: Callable[[sympy.Basic], bool],
    is_active: Callable[[sympy.Basic], bool],
) -> set[sympy.Basic]:
    """The operands and results eager autograd saves for the operations of `expr`."""
    saved: set[sympy.Basic] = set()
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Mul):
            # A product saves each tensor factor that another factor's gradient reads.
            factors = [a for a in node.args if is_tensor(a)]
            active = [a for a in factors if is_active(a)]
            saved.update(f for f in factors if any(a is not f for a in active))
            # n factors multiply pairwise: each partial product is saved by the next.
            saved.update(sympy.Mul(*factors[:k]) for k in range(2, len(factors)))
        elif isinstance(node, sympy.Pow):
            saved.add(node.base)
            if not node.exp.is_Number:
                saved.update((node.exp, node))
        elif isinstance(node, functions.ElementwiseFunction) and not _is_flat(node):
            saved.add(node if type(node).__name__ in _SAVES_RESULT else node.args[0])
        elif isinstance(node, piecewise.Where):
            saved.add(node.condition)
        elif isinstance(node, reductions.Normalization):
            saved.add(node)
        elif isinstance(node, arg_extrema.ArgExtremum):
            saved.add(node)  # the positions, which the gather reading them saves
        elif isinstance(node, reductions.Reduction) and node.name not in ("sum", "mean"):
            saved.update((node, node.argument))
        elif isinstance(node, piecewise.Kink):
            saved.update(node.args[:1])
    return saved


def _is_flat(node: functions.ElementwiseFunction) -> bool:
    """Whether a function's derivative is zero (round, floor, sign): torch saves nothing."""
    return all(node.fdiff(k + 1) == 0 for k in range(len(node.args)))


class Weights:
    """Elements of a value at the spec's test shapes; reductions make a value small."""

    def __init__(self, spec: Spec, definitions: Mapping[sympy.Basic, sympy.Basic]) -> None:
        fallback = default_shape(spec)
        self.shapes = {i.symbol: tuple(i.shape or fallback) for i in spec.tensor_inputs}
        self.definitions = definitions
        self.differentiable = {i.symbol for i in spec.differentiable_inputs}
        self.memo: dict[tuple[sympy.Basic, bool], frozenset[sympy.Basic]] = {}

    def is_tensor(self, node: sympy.Basic) -> bool:
        return bool(self._leaves(node, full=False))

    def is_active(self, node: sympy.Basic) -> bool:
        """Whether `node` depends on an input that gets a gradient."""
        return bool(self._leaves(node, full=False) & self.differentiable)

    def __call__(self, node: sympy.Basic) -> float:
        leaves = self._leaves(node, full=True)
        if not leaves:
            return 0.0
        return float(math.prod(broadcast_shapes([self.shapes[leaf] for leaf in leaves])))

    def _leaves(self, node: sympy.Basic, full: bool) -> frozenset[sympy.Basic]:
        """Tensor inputs `node` reads; with `full`, not counting those only inside reductions.

        Memoized per node: a forward is a DAG, and its names are shared many times.
        """
        key = (node, full)
        if key not in self.memo:
            if node in self.shapes:
                found: frozenset[sympy.Basic] = frozenset({node})
            elif node in self.definitions:
                found = self._leaves(self.definitions[node], full)
            elif full and isinstance(node, reductions.Reduction):
                found = frozenset()
            else:
                found = frozenset().union(*(self._leaves(arg, full) for arg in node.args))
            self.memo[key] = found
        return self.memo[key]


def saved_values(
    spec: Spec,
    forward: Sequence[Assignment],
    recomputed: Sequence[Assignment],
    plan: BackwardPlan,
    tensors: set[sympy.Symbol],
) -> tuple[sympy.Symbol, ...]:
    """The forward values the backward reads saved (Note [Saved values] in symgrad.ad.saving).

    Candidates are the tensor values `plan` recomputes, except one an output renames
    (one tensor cannot be returned as a differentiable and a non-differentiable output).
    """
    planned = {a.target for block in plan.prelude for a in block.statements}
    for part in plan.outputs:
        planned |= {a.target for block in part.shared for a in block.statements}
        planned |= {a.target for gradient in part.gradients for a in gradient.statements}
    renamed = {a.expr for a in forward if a.expr.is_Symbol}
    candidates = [
        a
        for a in recomputed
        if a.target in planned and a.target in tensors and a.target not in renamed
    ]
    return choose_saved_values(spec, forward, candidates, plan.saved_tensors)


def choose_saved_values(
    spec: Spec,
    forward: Sequence[Assignment],
    candidates: Sequence[Assignment],
    saved_already: Iterable[sympy.Basic],
) -> tuple[sympy.Symbol, ...]:
    """The candidates to save, costliest to recompute first, within eager's saved elements.

    `candidates` are the forward values the backward would recompute, in forward order;
    `saved_already` the inputs and outputs it saves anyway.
    """
    definitions = {a.target: a.expr for a in forward}
    weigh = Weights(spec, definitions)
    budget = eager_saved_elements(spec) - sum(weigh(s) for s in set(saved_already))
    if spec.save == "speed":
        budget = math.inf  # Note [Save choices] in symgrad.ad.saving
    table = costs.table()
    own = {a.target: table.expression(a.expr) for a in candidates}
    total = {a.target: sum(own[t] for t in closure({a.target}, candidates)) for a in candidates}
    below = [t for t in total if 0 < total[t] < MIN_SAVED_COST and spec.save != "speed"]
    held_by_eager = _held_by_eager(spec, definitions, below, candidates) if below else set()
    chosen: list[sympy.Symbol] = []
    for target in sorted(total, key=lambda t: -total[t]):
        if isinstance(definitions[target], views.View):
            continue  # a view is free to recompute, and saved it would alias an output
        weight = weigh(target)
        floor = 0.0 if spec.save == "speed" or target in held_by_eager else MIN_SAVED_COST
        if weight <= budget and total[target] >= floor and total[target] > 0:
            chosen.append(target)
            budget -= weight
    order = {a.target: n for n, a in enumerate(candidates)}
    return tuple(sorted(chosen, key=order.__getitem__))


def _held_by_eager(
    spec: Spec,
    definitions: Mapping[sympy.Basic, sympy.Basic],
    below: Sequence[sympy.Symbol],
    candidates: Sequence[Assignment],
) -> set[sympy.Symbol]:
    """The candidates `below` the floor that are saved all the same (Note [Saved values]):
    eager autograd holds them too, and recomputing them takes two passes or more."""
    steps = {t: sum(passes(definitions[u]) for u in closure({t}, candidates)) for t in below}
    long = [t for t in below if steps[t] >= 2]
    if not long:
        return set()
    eager = eager_saved_values(spec)
    written = written_out(definitions)
    return {t for t in long if written[t] in eager}


def recompute_statements(
    saved: Collection[sympy.Basic], statements: Sequence[Assignment]
) -> tuple[Assignment, ...]:
    """The statements that recompute the saved values from the inputs, in order."""
    needed = closure(set(saved), statements)
    return tuple(a for a in statements if a.target in needed)


def recompute_outputs(
    spec: Spec, parts: Sequence[OutputGradients], by_target: Mapping[sympy.Basic, Assignment]
) -> list[OutputGradients]:
    """`parts` reading the spec's outputs through their definitions, recomputed, not saved."""
    outputs: dict[sympy.Basic, sympy.Expr] = {}
    for output in spec.outputs:  # an output may read an earlier one
        outputs[output.symbol] = by_target[output.symbol].expr.xreplace(outputs)
    return [
        dataclasses.replace(
            part,
            gradients={i: e.xreplace(outputs) for i, e in part.gradients.items()},
            statements=tuple(
                Assignment(s.target, s.expr.xreplace(outputs)) for s in part.statements
            ),
        )
        for part in parts
    ]
