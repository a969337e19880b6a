"""Reductions of the spec language: sum, mean, logsumexp, amax and amin over dimensions.

A reduction is the one kind of node that is not elementwise: its value has the reduced
shape, and its adjoint has to be broadcast back over the reduced dimensions before it
meets its argument. Everything else about the tree stays elementwise with torch's
broadcasting, so the reverse sweep needs only one more rule (`argument_adjoint`).

Each node is `Reduce*(argument, keepdim, *dims)` with `keepdim` 0 or 1 and the dims as
sympy Integers (none = over every dimension). They are atoms for sympy's cse, so dims
and flags are never pulled out as common subexpressions.

Note [Stable logsumexp]: `logsumexp` is a primitive (torch.logsumexp subtracts the
maximum), and its adjoint is written `exp(argument - logsumexp)`, which is at most 1, so
neither direction overflows at large inputs. Softmax is `exp(x - logsumexp(x, ...))`.

Note [Reductions of 0-d tensors]: torch reduces a 0-d tensor over dim 0 (or -1) to a
0-d tensor: no dimension goes. The adjoint's `unsqueeze` must then add none either, or
the gradient of a 0-d input comes out with shape [1]. Leading dims never need one
(`restoring_unsqueezes`), which covers dim=0. For dim=-1 whether a dimension went
depends on the argument's rank, known only at run time (a spec's `shape` is what its
test samples, not a contract), so the printers unsqueeze such a value only where it has
dimensions (`unsqueezes_by_rank`): a 0-d value broadcasts against the argument, of any
rank, exactly as its size-1 unsqueezed form would.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import sympy

from symgrad.language import contractions, functions, indexing, segments, views


class Reduction(sympy.Function):
    """A reduction over `dims` (all when empty) of a tensor expression; never evaluated."""

    # The name in the spec language, and torch's function of the same name.
    name: ClassVar[str]

    @classmethod
    def eval(cls, *args: Any) -> None:
        """Keep the call as written."""
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def argument(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def keepdim(self) -> bool:
        return bool(self.args[1])

    @property
    def dims(self) -> tuple[int, ...] | None:
        """The reduced dimensions as written, or None for all of them."""
        return tuple(int(d) for d in self.args[2:]) or None


class ReduceSum(Reduction):
    name = "sum"


class ReduceMean(Reduction):
    name = "mean"


class ReduceLogSumExp(Reduction):
    name = "logsumexp"


class ReduceExtremum(Reduction):
    """amax or amin; their gradient's tie rule is in symgrad.language.extrema."""


class ReduceAmax(ReduceExtremum):
    name = "amax"


class ReduceAmin(ReduceExtremum):
    name = "amin"


class AmaxAgain(ReduceAmax):
    """amax taken again to find its ties: never replaced by the forward's saved amax."""


class AminAgain(ReduceAmin):
    """amin taken again to find its ties: never replaced by the forward's saved amin."""


REDUCTIONS: dict[str, type[Reduction]] = {
    cls.name: cls for cls in (ReduceSum, ReduceMean, ReduceLogSumExp, ReduceAmax, ReduceAmin)
}
# Every reduction class a printer meets: the spec language's, and the extrema taken again.
REDUCTION_CLASSES: tuple[type[Reduction], ...] = (*REDUCTIONS.values(), AmaxAgain, AminAgain)


class Normalization(sympy.Function):
    """softmax or log_softmax of `argument` along one dim: `Cls(argument, dim)`.

    Not elementwise (each value reads its whole row) but shape-preserving. torch's
    kernels subtract the row maximum, so they are exact where `exp(x - logsumexp(x))`
    loses the last bits of x at large inputs.
    """

    name: ClassVar[str]

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def argument(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def dim(self) -> int:
        return int(self.args[1])


class Softmax(Normalization):
    name = "softmax"


class LogSoftmax(Normalization):
    name = "log_softmax"


NORMALIZATIONS: dict[str, type[Normalization]] = {cls.name: cls for cls in (Softmax, LogSoftmax)}


def normalize(name: str, argument: sympy.Expr, dim: int) -> Normalization:
    """Build `name(argument, dim=dim)`."""
    return NORMALIZATIONS[name](argument, sympy.Integer(dim))


def normalization_adjoint(node: Normalization, adjoint: sympy.Expr) -> sympy.Expr:
    """The adjoint a softmax or log_softmax passes to its argument.

    softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), sums along the dim.
    """
    dim = (node.dim,)
    if isinstance(node, Softmax):
        return node * (adjoint - reduce("sum", adjoint * node, dim, keepdim=True))
    total = reduce("sum", adjoint, dim, keepdim=True)
    return adjoint - functions.call("exp", node) * total


def reduce(
    name: str, argument: sympy.Expr, dims: tuple[int, ...] | None, keepdim: bool
) -> Reduction:
    """Build the reduction `name(argument, dim=dims, keepdim=keepdim)`."""
    integers = [sympy.Integer(d) for d in dims or ()]
    return REDUCTIONS[name](argument, sympy.Integer(int(keepdim)), *integers)


class Unsqueeze(sympy.Function):
    """`value` with size-1 dimensions put back where a reduction without keepdim removed them."""

    # How formulas for people (docstrings, `symgrad show`) spell it.
    name = "unsqueeze"

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.args[1:])


class ShapeFact(sympy.Function):
    """A number or shape that depends only on the input shapes, not on their values.

    The emitter computes each one from the input shapes once, in setup_context, and the
    backward reads it by name (symgrad.ad.derive names them before planning).
    """

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    def _eval_is_positive(self) -> bool:
        return True

    @property
    def argument(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result


class Count(ShapeFact):
    """`Count(argument, *dims)`: how many elements of `argument` a mean over `dims` combines."""

    # How formulas for people (docstrings, `symgrad show`) spell it.
    name = "numel"

    @property
    def dims(self) -> tuple[int, ...] | None:
        return tuple(int(d) for d in self.args[1:]) or None


class ShapeOf(ShapeFact):
    """`ShapeOf(reduction)`: the shape of a reduction's result."""


class SumTo(sympy.Function):
    """`SumTo(value, ShapeOf(target), ShapeOf(frame))`: `value` counted once per element of
    the frame it stands for, then summed back to the target's shape.

    A gradient term stands for a value broadcast over its frame (the shape of the
    expression whose adjoint it is), though it may be smaller itself (a 0-d gradient of
    a sum). Terms of different frames cannot be added before this sum: the smaller one
    would be counted once per broadcast row (Note [Frames of gradient terms] in
    symgrad.ad.derive). With target and frame equal, it only expands `value`.
    """

    @classmethod
    def eval(cls, *args: Any) -> None:
        return None

    def _eval_is_extended_real(self) -> bool:
        return True

    @property
    def value(self) -> sympy.Expr:
        result: sympy.Expr = self.args[0]
        return result

    @property
    def target(self) -> ShapeOf:
        result: ShapeOf = self.args[1]
        return result


def summed_reduction(node: SumTo, shapes: Shapes) -> Reduction | None:
    """The reduction whose dims `node` sums over, where it is exactly such a sum.

    That is when its target is a reduction and its frame the reduction's argument's
    shape; readable printers then write `sum(v, dim=...)` instead of a shape sum.
    """
    target = shapes.definitions.get(node.target.argument, node.target.argument)
    frame = node.args[2].argument
    if isinstance(target, Reduction) and shapes.of(frame) == shapes.of(target.argument):
        return target
    return None


def broadcast_back(node: Reduction, value: sympy.Expr) -> sympy.Expr:
    """`value`, in the reduced shape of `node`, made to broadcast against its argument."""
    if node.keepdim or node.dims is None:
        return value  # a kept size-1 dimension, or a 0-d value, broadcasts as it is
    return Unsqueeze(value, *node.args[2:])


def argument_adjoint(node: Reduction, adjoint: sympy.Expr) -> sympy.Expr:
    """The adjoint that `node` passes to its argument, given its own (in its shape)."""
    spread = broadcast_back(node, adjoint)
    if isinstance(node, ReduceSum):
        return spread
    if isinstance(node, ReduceMean):
        return spread / Count(node.argument, *node.args[2:])
    if isinstance(node, ReduceLogSumExp):  # Note [Stable logsumexp]
        return spread * functions.call("exp", node.argument - broadcast_back(node, node))
    raise TypeError(f"no adjoint rule for {type(node).__name__}")


def unsqueeze_order(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The order in which `unsqueeze` calls restore `dims`.

    Non-negative dims count from the front, so they go back in increasing order;
    negative ones count from the back, so -1 goes back first, then -2, and so on.
    """
    return tuple(sorted(dims, reverse=dims[0] < 0))


def restoring_unsqueezes(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The `unsqueeze` calls, in order, that make a value reduced over `dims` broadcast
    against the reduction's argument.

    torch aligns shapes at their last dimension, so leading reduced dims (0, 1, ..., k-1)
    need no size-1 dimension: a sum over dim 0 of shape [b] already broadcasts against
    [a, b]. Leaving them out is also what keeps a 0-d argument 0-d, for which torch
    takes dim=0 and whose reduction removes no dimension (Note [Reductions of 0-d
    tensors]). The dims after that prefix move down by its length.
    """
    order = unsqueeze_order(dims)
    if order[0] < 0:
        return order
    leading = 0
    while leading < len(order) and order[leading] == leading:
        leading += 1
    return tuple(d - leading for d in order[leading:])


def unsqueezes_by_rank(dims: tuple[int, ...]) -> bool:
    """Whether the value of a reduction over `dims` is unsqueezed only where it is not
    0-d (Note [Reductions of 0-d tensors]).

    Only dim -1 alone: of the dims that need an unsqueeze, it is the one torch accepts
    on a 0-d argument (several dims, or -2 and below, need a rank of at least 2).
    """
    return dims == (-1,)


# A shape, as a function of the input shapes:
#   ("input", name)                      the shape of a tensor input
#   ("broadcast", (shape, ...))          torch.broadcast_shapes of two or more shapes
#   ("reduced", shape, dims, keepdim)    the shape of a reduction (dims None for all)
#   ("view", shape, method, parameters)  shape.method(*parameters) (symgrad.language.views)
#   ("cat", (shape, ...), dim)           torch.cat of tensors of these shapes along dim
#   ("einsum", subscripts, (shape, ...)) the shape of a contraction of those operands
Shape = tuple[Any, ...]


def shape_of(
    expr: sympy.Basic,
    definitions: Mapping[sympy.Basic, sympy.Basic],
    tensors: Collection[sympy.Basic],
) -> Shape | None:
    """The shape of `expr` from the input shapes, or None for a number (see `Shapes`)."""
    return Shapes(definitions, tensors).of(expr)


class Shapes:
    """Shapes of expressions as functions of the input shapes, memoized.

    `definitions` gives the expression of each forward value, `tensors` the tensor
    inputs (and any symbol with a known shape, mapped by `aliases` to an expression of
    that shape). The result is canonical, so equal shapes compare equal: a reduction
    with keepdim broadcast against its own argument is the argument's shape. Unknown
    symbols count as numbers, so a shape is never larger than the truth.
    """

    def __init__(
        self,
        definitions: Mapping[sympy.Basic, sympy.Basic],
        tensors: Collection[sympy.Basic],
        aliases: Mapping[sympy.Basic, sympy.Basic] | None = None,
    ) -> None:
        self.definitions = definitions
        self.tensors = tensors
        self.aliases = dict(aliases or {})
        self.memo: dict[sympy.Basic, Shape | None] = {}

    def of(self, node: sympy.Basic) -> Shape | None:
        if node in self.memo:
            return self.memo[node]
        result: Shape | None
        if node in self.tensors:
            result = ("input", str(node))
        elif node in self.definitions:
            result = self.of(self.definitions[node])
        elif node in self.aliases:
            result = self.of(self.aliases[node])
        elif isinstance(node, Reduction):
            inner = self.of(node.argument)
            result = None if inner is None else ("reduced", inner, node.dims, node.keepdim)
        elif isinstance(node, ShapeFact):
            result = None
        elif isinstance(node, SumTo):
            result = self.of(node.target.argument)
        elif isinstance(node, indexing.Gather):
            result = self.of(node.index)  # torch.gather: the index's shape
        elif isinstance(node, (indexing.ScatterAdd, segments.IndexAdd)):
            result = self.of(node.shape.args[0])  # the gathered value's shape
        elif isinstance(node, (*views.SHAPED, views.ReshapeTo, views.PieceZeros, views.CatPiece)):
            result = self.view_of(node)
        elif isinstance(node, contractions.Einsum):
            shapes = tuple(self.of(operand) for operand in node.operands)
            result = None if None in shapes else ("einsum", node.subscripts, shapes)
        elif isinstance(node, (segments.SegmentSum, segments.IndexSelect)):
            result = segments.shape_of(node, self.of(node.argument))
        elif isinstance(node, Unsqueeze):
            result = None  # only ever multiplied into a value of its argument's shape
        else:
            result = _broadcast([s for s in map(self.of, node.args) if s is not None])
        self.memo[node] = result
        return result

    def view_of(self, node: sympy.Basic) -> Shape | None:
        """The shape of a view, a cat or their adjoints (Note [Views])."""
        if isinstance(node, views.View):
            inner = self.of(node.argument)
            return None if inner is None else ("view", inner, node.method, node.parameters)
        if isinstance(node, views.Cat):
            return ("cat", tuple(self.of(p) for p in node.pieces), node.dim)
        if isinstance(node, views.CatPiece):
            return self.of(node.sizes[node.piece].args[0])
        return self.of(node.args[1].args[0])  # the ShapeOf fact it takes its shape from


def _broadcast(shapes: list[Shape]) -> Shape | None:
    """The broadcast of `shapes`, without the ones that others already cover."""
    parts: list[Shape] = []
    for shape in shapes:
        for part in shape[1] if shape[0] == "broadcast" else (shape,):
            if part not in parts:
                parts.append(part)
    # x broadcast with a keepdim reduction of x is x.
    covered = [p for p in parts if p[0] == "reduced" and p[3] and p[1] in parts]
    parts = sorted((p for p in parts if p not in covered), key=repr)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ("broadcast", tuple(parts))
