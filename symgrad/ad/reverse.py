"""Reverse mode: one sweep of adjoints from an output back to the forward's symbols.

Note [Frames of gradient terms]: torch broadcasts elementwise operations, and the
gradient of a broadcast value is the sum of its incoming gradient over the broadcast
dimensions. Summing at every operation (as autograd does) would cost a reduction per
node, so a term of an adjoint carries its *frame* instead: the expression whose
adjoint it is, so that the term stands for its value broadcast over that
expression's shape. Multiplying by local partials keeps the frame (a partial is never
larger than its node). A term may be smaller than its frame (the 0-d gradient of a
`sum` stands for that value at every element the sum read); `full` records when it is
known to have the frame's whole shape.

Terms of one frame add up as they are. Terms of different frames do not: the smaller
one would be counted once per broadcast row. Each is then summed to the shape of the
node they meet (`SumTo`), exactly once, and the node's shape becomes their frame. The
same happens before a reduction (its adjoint must have the reduced shape) and before
a softmax (whose rule sums along its dim). Shapes are compared as functions of the
input shapes (`symgrad.language.reductions.Shapes`), so the test is decided at generation time;
where two shapes differ there but agree at run time, the emitted sum is a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sympy
from sympy.logic.boolalg import Boolean

from symgrad.ad.ir import Assignment, Namer
from symgrad.language import (
    arg_extrema,
    contractions,
    extrema,
    indexing,
    layer_norms,
    piecewise,
    pullbacks,
    reductions,
    rules,
    scans,
    segment_extrema,
    segments,
    views,
)

# An adjoint larger than this (in sympy operations) is named by a temporary before it is
# passed on, so that no adjoint repeats a long product: sympy flattens products, and
# without names each adjoint deep in a chain would copy every factor above it. Small
# adjoints stay inline, where sympy can still cancel factors (delta**2 / delta**2).
_INLINE_ADJOINT_OPS = 24
# A product with more active factors than this gets prefix and suffix products, so
# that its partials (each the product of all other factors) cost linear, not quadratic.
_DIRECT_PRODUCT_FACTORS = 3


@dataclass(frozen=True)
class Term:
    """A gradient term: `expr` broadcast over the shape of `frame` (Note [Frames ...])."""

    expr: sympy.Expr
    frame: sympy.Basic
    # Whether `expr` itself has the frame's whole shape.
    full: bool
    # A condition outside which `expr` is zero: the term flowed through a `where` or a
    # kink (Note [Masked adjoints]); None when unknown.
    mask: Boolean | None = None


def term_sum(terms: Sequence[Term], node: sympy.Basic, shapes: reductions.Shapes) -> Term:
    """The terms of `node`'s adjoint as one term (Note [Frames of gradient terms])."""
    terms = [t for t in terms if t.expr != 0] or [Term(sympy.Integer(0), node, True)]
    terms = _merged_chunk_cats(terms, node)
    frames = {shapes.of(t.frame) for t in terms}
    if len(frames) > 1:
        terms = [fit(t, node, shapes, exact=False) for t in terms]
    if len(terms) == 1:
        return terms[0]
    total = sympy.Add(*(t.expr for t in terms))
    masks = [t.mask for t in terms]
    mask = None if any(m is None for m in masks) else sympy.Or(*masks)
    return Term(total, terms[0].frame, any(t.full for t in terms), mask)


def _merged_chunk_cats(terms: list[Term], node: sympy.Basic) -> list[Term]:
    """`terms` with the adjoints of one chunk's pieces concatenated once (Note [Views])."""
    cats = [t.expr for t in terms if isinstance(t.expr, views.ChunkCat)]
    if len(cats) < 2:
        return terms
    rest = [t for t in terms if not isinstance(t.expr, views.ChunkCat)]
    return rest + [Term(expr, node, True) for expr in views.merge_chunk_cats(cats)]


def fit(term: Term, node: sympy.Basic, shapes: reductions.Shapes, exact: bool) -> Term:
    """`term` in the frame of `node`: summed to its shape; with `exact`, also expanded to it."""
    if term.expr == 0:  # terms that cancelled (x - x): nothing to sum
        return Term(term.expr, node, True)
    if shapes.of(term.frame) == shapes.of(node) and (term.full or not exact):
        return Term(term.expr, node, term.full, term.mask)
    target, frame = reductions.ShapeOf(node), reductions.ShapeOf(term.frame)
    return Term(reductions.SumTo(term.expr, target, frame), node, True)


class ReverseSweep:
    """One reverse sweep: the adjoint terms of the forward's symbols for one output."""

    def __init__(self, active: set[sympy.Basic], namer: Namer, shapes: reductions.Shapes) -> None:
        self.active = active
        self.namer = namer
        self.shapes = shapes
        # Named adjoints and partial products, in the order they must be computed.
        self.statements: list[Assignment] = []
        self.adjoints: dict[sympy.Basic, list[Term]] = {}

    def run(
        self,
        output: sympy.Symbol,
        output_expr: sympy.Expr,
        seed: sympy.Expr,
        intermediates: Sequence[Assignment],
    ) -> None:
        """Sweep from `output` (defined by `output_expr`) with incoming gradient `seed`."""
        self.backpropagate(output_expr, Term(seed, output, True))
        for assignment in reversed(intermediates):
            terms = self.adjoints.pop(assignment.target, None)
            if terms and assignment.target in self.active:
                adjoint = term_sum(terms, assignment.target, self.shapes)
                if adjoint.expr != 0:
                    self.backpropagate(assignment.expr, adjoint)

    def adjoint(self, symbol: sympy.Basic) -> Term | None:
        """The adjoint of an input symbol after the sweep, as one term."""
        terms = self.adjoints.get(symbol)
        return term_sum(terms, symbol, self.shapes) if terms else None

    def name(self, expr: sympy.Expr) -> sympy.Expr:
        """`expr`, or a temporary holding it when it is large."""
        if expr.is_Atom or sympy.count_ops(expr) <= _INLINE_ADJOINT_OPS:
            return expr
        temporary = self.namer.temporary()
        self.statements.append(Assignment(temporary, expr))
        return temporary

    def backpropagate(self, expr: sympy.Expr, seed: Term) -> None:
        """Add the terms of seed * d expr / d symbol for every active symbol in `expr`."""
        order = _active_nodes(expr, self.active)
        if not order:
            return
        node_terms: dict[sympy.Basic, list[Term]] = {expr: [seed]}

        def add(node: sympy.Basic, term: Term) -> None:
            node_terms.setdefault(node, []).append(term)

        for node in reversed(order):
            terms = node_terms.pop(node, None)
            if not terms:
                continue
            if node.is_Symbol:
                self.adjoints.setdefault(node, []).extend(terms)
                continue
            adjoint = term_sum(terms, node, self.shapes)
            if adjoint.expr == 0:
                continue
            adjoint = Term(self.name(adjoint.expr), adjoint.frame, adjoint.full, adjoint.mask)
            if isinstance(node, layer_norms.NODES):  # Note [Layer norm]
                full = isinstance(node, layer_norms.LayerNorm)
                spread = node.argument_adjoint(fit(adjoint, node, self.shapes, full).expr)
                add(node.argument, Term(spread, node.argument, True))
            elif isinstance(node, reductions.Reduction):
                # Unsqueezing the reduced dims back needs the exact reduced shape.
                exact = not node.keepdim and node.dims is not None
                reduced = fit(adjoint, node, self.shapes, exact).expr
                add(node.argument, _reduction_term(node, reduced))
            elif isinstance(node, reductions.Normalization):
                exact_adjoint = fit(adjoint, node, self.shapes, exact=True).expr
                spread = reductions.normalization_adjoint(node, exact_adjoint)
                add(node.argument, Term(spread, node.argument, True))
            elif isinstance(node, indexing.Gather):
                self.gather_terms(node, adjoint, add)
            elif isinstance(node, (views.View, views.Cat)):
                self.view_terms(node, adjoint, add, order)
            elif isinstance(node, scans.CONSTANT_NODES):
                continue  # positions and sort indices have no derivative
            elif isinstance(node, scans.AlongDim):
                self.scan_terms(node, adjoint, add)
            elif isinstance(node, contractions.Einsum):
                exact = fit(adjoint, node, self.shapes, exact=True).expr
                for k, operand in enumerate(node.operands):
                    if operand in order:  # Note [Contractions]: a contraction again
                        spread = contractions.einsum_adjoint(node, exact, k)
                        add(operand, Term(spread, operand, True))
            elif isinstance(node, segment_extrema.SegmentAmax):  # Note [Segment maxima]
                exact = fit(adjoint, node, self.shapes, exact=True).expr
                spread = segment_extrema.source_adjoint(node, exact)
                mask = segment_extrema.is_tie(node)
                add(node.source, Term(spread, node.source, True, mask))
            elif isinstance(node, segments.SegmentSum):  # Note [Segment sums]
                exact = fit(adjoint, node, self.shapes, exact=True).expr
                selected = segments.segment_sum_adjoint(node, exact)
                add(node.source, Term(selected, node.source, True))
            elif isinstance(node, segments.IndexSelect):  # Note [Index selects]
                self.gather_terms(node, adjoint, add)
            elif isinstance(node, piecewise.Kink) and node.partial(0) is None:
                for arg, term in self.kink_terms(node, adjoint):
                    if arg in order:
                        add(arg, term)
            elif isinstance(node, piecewise.Where):
                cond, taken, untaken = node.args
                zero = sympy.Integer(0)
                if taken in order:
                    add(taken, _masked(adjoint, cond, piecewise.where(cond, adjoint.expr, zero)))
                if untaken in order:
                    branch = piecewise.where(cond, zero, adjoint.expr)
                    add(untaken, _masked(adjoint, sympy.Not(cond), branch))
            elif (pulled := pullbacks.pullback(node, adjoint.expr)) is not None:
                full = adjoint.full or self.shapes.of(node) == self.shapes.of(adjoint.frame)
                add(node.args[0], Term(pulled, adjoint.frame, full, adjoint.mask))
            else:
                frame_shape = self.shapes.of(adjoint.frame)
                for index, partial in self.partials(node, order):
                    full = adjoint.full or self.shapes.of(partial) == frame_shape
                    product = _chain(adjoint, partial)
                    add(node.args[index], Term(product, adjoint.frame, full, adjoint.mask))

    def gather_terms(
        self,
        node: indexing.Gather | segments.IndexSelect,
        adjoint: Term,
        add: Callable[[sympy.Basic, Term], None],
    ) -> None:
        """Scatter-add (index_add) the adjoint, in the gather's shape, into zeros of the
        argument's.

        The adjoint is named when it is not a symbol: the spelling reads it twice (its
        dtype, then its values).
        """
        exact = fit(adjoint, node, self.shapes, exact=True).expr
        if not exact.is_Atom:
            temporary = self.namer.temporary()
            self.statements.append(Assignment(temporary, exact))
            exact = temporary
        shape = reductions.ShapeOf(node.argument)
        if isinstance(node, segments.IndexSelect):
            spread: sympy.Expr = segments.index_select_adjoint(node, exact, shape)
        else:
            spread = indexing.gather_adjoint(node, exact, shape)
        add(node.argument, Term(spread, node.argument, True))

    def view_terms(
        self,
        node: views.View | views.Cat,
        adjoint: Term,
        add: Callable[[sympy.Basic, Term], None],
        order: Mapping[sympy.Basic, None],
    ) -> None:
        """The adjoint, exactly in the view's shape, viewed back (Note [Views])."""
        exact = fit(adjoint, node, self.shapes, exact=True).expr
        if not exact.is_Atom:  # a chunk's adjoint reads it twice (dtype, values)
            temporary = self.namer.temporary()
            self.statements.append(Assignment(temporary, exact))
            exact = temporary
        if isinstance(node, views.View):
            spread = views.view_adjoint(node, exact, reductions.ShapeOf)
            add(node.argument, Term(spread, node.argument, True))
            return
        for piece, sliced in zip(
            node.pieces, views.cat_adjoints(node, exact, reductions.ShapeOf), strict=True
        ):
            if piece in order:
                add(piece, Term(sliced, piece, True))

    def scan_terms(
        self, node: scans.AlongDim, adjoint: Term, add: Callable[[sympy.Basic, Term], None]
    ) -> None:
        """A scan's, flip's or sort's adjoint (Note [Scans and sort]), from its own in its
        exact shape; named when a sort's scatter reads it twice (dtype, then values)."""
        exact = fit(adjoint, node, self.shapes, exact=True).expr
        if isinstance(node, scans.Sort) and not exact.is_Atom:
            temporary = self.namer.temporary()
            self.statements.append(Assignment(temporary, exact))
            exact = temporary
        shape = reductions.ShapeOf(node.argument)
        spread = scans.argument_adjoint(node, exact, shape)
        add(node.argument, Term(spread, node.argument, True))

    def kink_terms(self, node: piecewise.Kink, adjoint: Term) -> list[tuple[sympy.Expr, Term]]:
        """The terms a kink passes to its arguments, routed through its `where` form.

        The form is swept with stand-ins for the arguments, so it routes the gradient
        while every value the backward reads stays the kink's own (its form may differ
        at ties and NaN; see piecewise.Kink).
        """
        stand_ins = [sympy.Dummy(f"kink{i}", real=True) for i in range(len(node.args))]
        local = ReverseSweep(set(stand_ins), self.namer, self.shapes)
        local.backpropagate(type(node)(*stand_ins).expanded(), adjoint)
        back = dict(zip(stand_ins, node.args, strict=True))
        self.statements += [Assignment(a.target, a.expr.xreplace(back)) for a in local.statements]
        return [
            (arg, Term(term.expr.xreplace(back), term.frame, term.full, _back(term.mask, back)))
            for stand_in, arg in back.items()
            for term in local.adjoints.get(stand_in, ())
        ]

    def partials(
        self, node: sympy.Basic, order: Mapping[sympy.Basic, None]
    ) -> list[tuple[int, sympy.Expr]]:
        """(index, d node / d arg) for each active argument of `node`."""
        indices = [i for i, arg in enumerate(node.args) if arg in order]
        if isinstance(node, sympy.Mul) and len(indices) > _DIRECT_PRODUCT_FACTORS:
            return self.product_partials(node.args, indices)
        return [(i, rules.local_partial(node, i)) for i in indices]

    def product_partials(
        self, factors: tuple[sympy.Basic, ...], indices: list[int]
    ) -> list[tuple[int, sympy.Expr]]:
        """Partials of a product through prefix and suffix products: linear in its size."""
        prefixes: list[sympy.Expr] = [sympy.Integer(1)]
        for factor in factors[:-1]:
            prefixes.append(self.name(prefixes[-1] * factor))
        suffixes: list[sympy.Expr] = [sympy.Integer(1)]
        for factor in reversed(factors[1:]):
            suffixes.append(self.name(factor * suffixes[-1]))
        suffixes.reverse()
        return [(i, prefixes[i] * suffixes[i]) for i in indices]


def _reduction_term(node: reductions.Reduction, adjoint: sympy.Expr) -> Term:
    """The term a reduction passes to its argument, given its own adjoint (in its shape)."""
    if isinstance(node, reductions.ReduceExtremum):  # zero outside the ties
        spread = extrema.argument_adjoint(node, adjoint)
        return Term(spread, node.argument, True, extrema.is_tie(node))
    spread = reductions.argument_adjoint(node, adjoint)
    full = isinstance(node, reductions.ReduceLogSumExp)  # times exp(arg - lse)
    return Term(spread, node.argument, full)


def _masked(adjoint: Term, cond: Boolean, expr: sympy.Expr) -> Term:
    """The term `expr`, zero outside `cond` and outside `adjoint`'s own mask."""
    mask = cond if adjoint.mask is None else sympy.And(adjoint.mask, cond)
    return Term(expr, adjoint.frame, adjoint.full, mask)


def _back(mask: Boolean | None, back: Mapping[sympy.Basic, sympy.Basic]) -> Boolean | None:
    """`mask` with a kink's stand-ins replaced by its arguments."""
    return None if mask is None else mask.xreplace(back)


def _chain(adjoint: Term, partial: sympy.Expr) -> sympy.Expr:
    """adjoint * partial, formed inside the adjoint's mask where the partial has a pole.

    Note [Masked adjoints]: an adjoint that flowed through a `where` or a kink is zero
    where that branch is not taken, and there the partial may be infinite (max(sqrt(s),
    eps) at s = 0: its adjoint is 0, d sqrt(s)/ds is inf, and 0 * inf is NaN). The guard
    pass cannot move s: sqrt(s) is a forward value, not a branch. So the product is
    formed under the mask, where(mask, adjoint * partial, 0), which torch evaluates
    without multiplying the untaken inf by zero. Partials without a pole multiply as
    usual, so ordinary backward code is unchanged.
    """
    if adjoint.mask is None or not _has_pole(partial):
        return adjoint.expr * partial
    inner = adjoint.expr
    if isinstance(inner, piecewise.Where) and inner.args[0] == adjoint.mask and inner.args[2] == 0:
        inner = inner.args[1]  # where(m, a, 0) * p is where(m, a * p, 0)
    return piecewise.where(_merge_ties(adjoint.mask), inner * partial, sympy.Integer(0))


def _merge_ties(mask: sympy.Basic) -> sympy.Basic:
    """`a > e | a == e` (max's two routes) as `a >= e`, and likewise for `<`.

    A local rewrite, not sympy.simplify_logic: that one is unbounded in the size of the
    mask and differentiates the relations' sides, which the language's nodes refuse.
    """
    if not isinstance(mask, sympy.Or):
        return mask
    terms = list(mask.args)
    for tie in [t for t in terms if isinstance(t, sympy.Eq)]:
        for strict, wide in ((sympy.StrictGreaterThan, sympy.Ge), (sympy.StrictLessThan, sympy.Le)):
            for side in (strict(*tie.args), strict(*reversed(tie.args))):
                if side in terms and tie in terms:
                    terms.remove(side)
                    terms.remove(tie)
                    terms.append(wide(*side.args))
    return sympy.Or(*terms)


def _has_pole(expr: sympy.Basic) -> bool:
    """Whether `expr` divides or takes a fractional power: it may be infinite somewhere."""
    return any(not (p.exp.is_Integer and p.exp >= 0) for p in expr.atoms(sympy.Pow))


def _active_nodes(expr: sympy.Expr, active: set[sympy.Basic]) -> dict[sympy.Basic, None]:
    """The distinct subtrees of `expr` that depend on an active symbol, children first."""
    order: dict[sympy.Basic, None] = {}
    visited: set[sympy.Basic] = set()
    stack: list[tuple[sympy.Basic, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if isinstance(node, arg_extrema.ArgExtremum):
                continue  # positions: constant (Note [Arg extrema])
            if node in active or any(arg in order for arg in node.args):
                order[node] = None
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        stack.extend((arg, False) for arg in reversed(node.args))
    return order
