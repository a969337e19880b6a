"""The form of the language's own constructs, chosen once for every backend; each spells it.

Conditionals, kinks, activations, pullbacks, reductions and kept shapes: which torch
operation computes each, and what a number beside tensors becomes (Note [Forms and
spellings] in symgrad.backends.forms.arithmetic). `ConstructForms` decides; a backend's
printer subclasses it and writes each operation down in its `_spell_*` methods.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import sympy
from sympy.printing.precedence import PRECEDENCE

from symgrad.backends.base import UnprintableError
from symgrad.backends.forms.arg_extrema import ArgExtremumForms
from symgrad.backends.forms.arithmetic import ArithmeticForms
from symgrad.backends.forms.contractions import ContractionForms
from symgrad.backends.forms.dtypes import DtypeForms
from symgrad.backends.forms.layer_norms import LayerNormForms
from symgrad.backends.forms.losses import LossForms
from symgrad.backends.forms.products import ProductForms
from symgrad.backends.forms.scans import ScanForms
from symgrad.backends.forms.segment_extrema import SegmentExtremaForms
from symgrad.backends.forms.segments import SegmentForms
from symgrad.backends.forms.selects import SelectForms
from symgrad.backends.forms.views import ViewForms
from symgrad.backends.statements import value_tensors
from symgrad.language import (
    activations,
    arg_extrema,
    broadcasts,
    functions,
    indexing,
    piecewise,
    pullbacks,
    reductions,
)


class ConstructForms(
    LayerNormForms,
    LossForms,
    ArgExtremumForms,
    DtypeForms,
    ProductForms,
    SegmentExtremaForms,
    SegmentForms,
    ContractionForms,
    ScanForms,
    ViewForms,
    SelectForms,
    ArithmeticForms,
):
    """The language's constructs over tensors and numbers, in torch's operations."""

    def _print_Relational(self, expr: sympy.Basic) -> str:
        """A comparison; positions compared with an index input are int64, never rounded
        to the value's dtype (class 257 is 256 in bfloat16)."""
        indexed = any(isinstance(a, indexing.IndexSymbol) for a in expr.free_symbols)
        outer, self.integer_positions = self.integer_positions, indexed
        try:
            lhs, rhs = (self.parenthesize(side, PRECEDENCE["Relational"]) for side in expr.args)
        finally:
            self.integer_positions = outer
        return f"({lhs} {expr.rel_op} {rhs})"

    # --- Conditional values ---------------------------------------------------------------

    def _print_Where(self, expr: piecewise.Where) -> str:
        cond, a, b = expr.args
        if not self.is_tensor(expr):
            return self._spell_number_where(cond, a, b)
        if not self.is_tensor(cond):
            # Decided without tensors: still a where, so that the result has the
            # branches' broadcast shape, promoted dtype and device (the untaken branch is
            # guarded like any other, Note [Untaken branches] in symgrad.ad.guards).
            like = self._print(self._numeric_tensor(a if self.is_tensor(a) else b))
            condition = self._spell_decided_condition(cond, like)
            return self._spell_where(condition, self._print(a), self._print(b))
        threshold = self._threshold_backward(cond, a, b)
        if threshold is not None:
            return threshold
        signed = self._signed_select(cond, a, b)
        if signed is not None:
            return signed
        leaky = self._leaky_relu_backward(cond, a, b)
        if leaky is not None:
            return leaky
        if not (self.is_tensor(a) or self.is_tensor(b)):
            # A where of two numbers would take the default dtype: `a` becomes a 0-d
            # tensor of the dtype torch promotes the compared tensors and the number to
            # (8.5 beside an integer tensor stays 8.5), on their device.
            names = [self._print(t) for t in self._numeric_tensors(cond)]
            dtype = functools.reduce(
                self._spell_promote_types, (self._spell_result_type(n, a) for n in names)
            )
            # A fraction sets the dtype wherever it is: where(c, 1, 1/2) beside integers
            # is a float, as the where's own promotion would make it.
            fraction = b if a.is_Integer and not b.is_Integer else a
            exact_dtype = functools.reduce(
                self._spell_promote_types,
                (self._spell_result_type(n, fraction) for n in names),
            )
            cast = self._exact_select(cond, a, b, exact_dtype)
            if cast is not None:
                return cast
            promoted = self._spell_scalar_tensor_on(self._print(a), dtype, names[0])
            return self._spell_where(self._print(cond), promoted, self._print(b))
        return self._spell_where(self._print(cond), self._print(a), self._print(b))

    def _numeric_tensor(self, cond: sympy.Basic) -> sympy.Basic:
        """A tensor (not a boolean temporary) that `cond` compares, for dtype and device."""
        return self._numeric_tensors(cond)[0]

    def _numeric_tensors(self, cond: sympy.Basic) -> list[sympy.Basic]:
        """The tensors (not boolean temporaries) that `cond` compares, in name order; the
        values among them where it compares index inputs too."""
        pending = [cond]
        candidates: set[sympy.Basic] = set()
        while pending:
            for symbol in pending.pop().free_symbols & self.tensor_symbols:
                if symbol in self.conditions:
                    pending.append(self.conditions[symbol])
                else:
                    candidates.add(symbol)
        # An index input's int64 positions set no value's dtype beside a value compared.
        values = {c for c in candidates if not isinstance(c, indexing.IndexSymbol)}
        return sorted(values or candidates, key=str)

    # --- Kinks, activations and pullbacks -------------------------------------------------

    def _print_definition(self, expr: activations.Activation | pullbacks.Pullback) -> str:
        """The node written out, in parentheses: sympy ranks a call as an atom, so
        `gelu(k)**2` on a number would otherwise print as `k * (...) / 2**2`."""
        return f"({self._print(expr.expanded())})"

    def _print_Relu(self, expr: piecewise.Relu) -> str:
        (x,) = expr.args
        return self._spell_relu(self._print(x), self.is_tensor(x))

    def _print_Maximum(self, expr: piecewise.Maximum) -> str:
        return self._extremum(expr, "maximum")

    def _print_Minimum(self, expr: piecewise.Minimum) -> str:
        return self._extremum(expr, "minimum")

    def _extremum(self, expr: sympy.Basic, name: str) -> str:
        """maximum or minimum; a number beside a tensor becomes a 0-d tensor of its dtype
        (clamp would give the same values, but the whole gradient at a tie)."""
        a, b = expr.args
        texts = [self._print(a), self._print(b)]
        tensors = (self.is_tensor(a), self.is_tensor(b))
        if not any(tensors):
            return self._spell_number_extremum(name, texts)
        if not all(tensors):
            texts = self._as_tensors((a, b), texts)
        return self._spell_extremum(name, texts)

    def _print_Clamp(self, expr: piecewise.Clamp) -> str:
        """One clamp where both bounds are numbers or both tensors, else one per bound."""
        x, low, high = expr.args
        texts = [self._print(arg) for arg in expr.args]
        if not self.is_tensor(x):
            if self.is_tensor(low) or self.is_tensor(high):
                raise UnprintableError("clamp of a number between tensors is not supported")
            return self._spell_number_clamp(texts)
        if self.is_tensor(low) == self.is_tensor(high):
            return self._spell_clamp(texts)
        return self._spell_clamp_each(texts)

    def _print_Activation(self, expr: activations.Activation) -> str:
        """torch's fused call; on a number, or without such a call, the definition."""
        x, *values = expr.args
        if not self.is_tensor(x) or not self._has_activation(expr):
            return self._print_definition(expr)
        for (keyword, _), value in zip(expr.parameters, values, strict=True):
            if self.is_tensor(value):
                raise UnprintableError(
                    f"{expr.name}() takes {keyword} as a number (a constant or a number"
                    " input), not a tensor"
                )
        return self._spell_activation(expr, self._print(x), values)

    def _print_Pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel on tensors; on numbers, the definition."""
        if not (self.is_tensor(expr.grad) and self.is_tensor(expr.point)):
            return self._print_definition(expr)
        return self._spell_pullback(expr)

    # --- Reductions and shapes ------------------------------------------------------------

    def _print_Reduction(self, expr: reductions.Reduction) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        if expr.dims is None and isinstance(expr, reductions.ReduceLogSumExp):
            # torch.logsumexp takes no dim=None: over the flattened argument.
            return self._spell_logsumexp_all(expr)
        if expr.dims is None and expr.keepdim and isinstance(expr, reductions.ReduceExtremum):
            # amax and amin take no dim=None: every dim is the empty list of dims.
            return self._spell_extremum_all_kept(expr, self._print(expr.argument))
        return self._spell_reduction(expr, self._print(expr.argument))

    def _print_Normalization(self, expr: reductions.Normalization) -> str:
        if not self.is_tensor(expr.argument):
            raise UnprintableError(f"{expr.name}() needs an argument that depends on a tensor")
        return self._spell_normalization(expr, self._print(expr.argument))

    def _print_Unsqueeze(self, expr: reductions.Unsqueeze) -> str:
        value = expr.args[0]
        if not self.is_tensor(value):
            return self._print(value)
        if reductions.unsqueezes_by_rank(expr.dims):  # Note [Reductions of 0-d tensors]
            self.used_helpers.add("unsqueeze_last")
            return f"{self.helpers['unsqueeze_last']}({self._print(value)})"
        return self._operand(value) + "".join(
            f".unsqueeze({d})" for d in reductions.restoring_unsqueezes(expr.dims)
        )

    def _print_SumTo(self, expr: reductions.SumTo) -> str:
        value, shape, frame = (self._print(arg) for arg in expr.args)
        self.used_helpers.add("sum_to")
        return f"{self.helpers['sum_to']}({value}, {shape}, {frame})"

    def _print_Broadcast(self, expr: broadcasts.Broadcast) -> str:
        """The value in the shape of the expression as written (Note [Cancelled shapes]).

        Cloned: a view of a named value, which the Function may also return as a saved
        value (not differentiable), would make the output not differentiable either.
        """
        value = self._print(expr.value)
        shapes = [s for s in broadcasts.shape_sources(expr) if self.is_tensor(s)]
        sources = [self._print(s) for s in shapes]
        sources = [s for s in sources if s != value]
        if not sources:  # the witnesses are numbers: they add no dimension
            return value
        if not self.is_tensor(expr.value):
            like = sources[0] if len(sources) == 1 else self._spell_broadcast_first(sources)
            return self._spell_full_like(like, value, self._value_dtype_source(shapes))
        return self._spell_broadcast_first([value, *sources]) + ".clone()"

    def _print_ZerosLike(self, expr: broadcasts.ZerosLike) -> str:
        """A gradient of zeros (Note [Cancelled shapes]) in the incoming gradient's dtype."""
        grad, shape = (self._print(arg) for arg in expr.args)
        return self._spell_zeros(grad, shape)

    def _value_dtype_source(self, shapes: list[sympy.Basic]) -> str | None:
        """Where full_like's value takes its dtype when a shape source is a boolean
        condition or an index (a bool or an int64 otherwise): a value the conditions
        compare, "" for the default dtype; None when no shape source is either."""
        if not any(
            s in self.conditions
            or piecewise.is_condition(s)
            or isinstance(s, indexing.IndexSymbol)
            or arg_extrema.is_index(s)
            for s in shapes
        ):
            return None
        values = value_tensors(shapes, self.tensor_symbols, self.conditions)
        return self._print(values[0]) if values else ""

    # --- Gathers (symgrad.language.indexing) ----------------------------------------------

    def _print_Gather(self, expr: indexing.Gather) -> str:
        """torch.gather: the argument's values at the index input's positions along dim."""
        if not self.is_tensor(expr.argument):
            raise UnprintableError("gather() needs an argument that depends on a tensor")
        argument, index = self._print(expr.argument), self._print(expr.index)
        return self._spell_gather(argument, expr.dim, index)

    def _print_ScatterAdd(self, expr: indexing.ScatterAdd) -> str:
        """A gather's adjoint: zeros of the gathered shape, the source added at the index
        by torch's scatter_add (no one-hot, no loop)."""
        source, shape, index = (self._print(a) for a in (expr.source, expr.shape, expr.index))
        return self._spell_scatter_add(source, shape, expr.dim, index)

    # --- The spellings a backend gives ----------------------------------------------------

    def _operand(self, expr: sympy.Basic) -> str:
        """`expr` printed so that a method call can follow it: `x`, `f(x)` or `(a + b)`."""
        raise NotImplementedError

    def _spell_number_where(self, cond: sympy.Basic, a: sympy.Basic, b: sympy.Basic) -> str:
        """where(cond, a, b) on numbers only."""
        raise NotImplementedError

    def _spell_decided_condition(self, cond: sympy.Basic, like: str) -> str:
        """A condition on numbers as a boolean 0-d tensor on `like`'s device."""
        raise NotImplementedError

    def _spell_result_type(self, name: str, a: sympy.Basic) -> str:
        """The dtype torch gives the tensor `name` and the number `a` together."""
        raise NotImplementedError

    def _spell_promote_types(self, first: str, second: str) -> str:
        raise NotImplementedError

    def _spell_scalar_tensor_on(self, text: str, dtype: str, like: str) -> str:
        """The number `text` as a 0-d tensor of `dtype` on `like`'s device."""
        raise NotImplementedError

    def _spell_where(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError

    def _spell_relu(self, x: str, tensor: bool) -> str:
        """relu of a tensor, or max(x, 0) of a number."""
        raise NotImplementedError

    def _spell_number_extremum(self, name: str, texts: list[str]) -> str:
        """max or min (`name` is maximum or minimum) of two numbers."""
        raise NotImplementedError

    def _spell_extremum(self, name: str, texts: list[str]) -> str:
        """torch.maximum or torch.minimum of two tensors."""
        raise NotImplementedError

    def _spell_number_clamp(self, texts: list[str]) -> str:
        raise NotImplementedError

    def _spell_clamp(self, texts: list[str]) -> str:
        """One clamp whose bounds are both numbers or both tensors."""
        raise NotImplementedError

    def _spell_clamp_each(self, texts: list[str]) -> str:
        """A clamp from below, then from above."""
        raise NotImplementedError

    def _has_activation(self, expr: activations.Activation) -> bool:
        """Whether the backend has a fused call for the activation."""
        raise NotImplementedError

    def _spell_activation(
        self, expr: activations.Activation, x: str, values: Sequence[sympy.Basic]
    ) -> str:
        """The fused call on the tensor `x`, with the parameters `values` (numbers)."""
        raise NotImplementedError

    def _spell_pullback(self, expr: pullbacks.Pullback) -> str:
        """torch's backward kernel on tensors."""
        raise NotImplementedError

    def _spell_logsumexp_all(self, expr: reductions.Reduction) -> str:
        """logsumexp over every dimension."""
        raise NotImplementedError

    def _spell_reduction(self, expr: reductions.Reduction, argument: str) -> str:
        raise NotImplementedError

    def _spell_extremum_all_kept(self, expr: reductions.Reduction, argument: str) -> str:
        """amax or amin over every dimension, kept, as an empty list of dims."""
        raise NotImplementedError

    def _spell_normalization(self, expr: reductions.Normalization, argument: str) -> str:
        raise NotImplementedError

    def _spell_gather(self, argument: str, dim: int, index: str) -> str:
        raise NotImplementedError

    def _spell_scatter_add(self, source: str, shape: str, dim: int, index: str) -> str:
        """Zeros of `shape` (the dtype and device of `source`), `source` added at `index`."""
        raise NotImplementedError

    def _spell_broadcast_first(self, texts: list[str]) -> str:
        """The first of `texts` broadcast against the others."""
        raise NotImplementedError

    def _spell_full_like(self, like: str, value: str, dtype_source: str | None) -> str:
        """A tensor shaped as `like` filled with `value` (see _value_dtype_source)."""
        raise NotImplementedError


def install_dispatch(printer: type[ConstructForms]) -> None:
    """Make every language function print through its generic method.

    sympy dispatches on the class name first, and the language's classes are named like
    the functions (exp, sigmoid), which StrPrinter may know under the same name.
    """
    for name in functions.FUNCTIONS:
        setattr(printer, f"_print_{name}", printer._print_ElementwiseFunction)
    for activation in activations.ACTIVATIONS.values():
        own = getattr(printer, f"_print_{activation.__name__}", printer._print_Activation)
        setattr(printer, f"_print_{activation.__name__}", own)
    for kind in pullbacks.PULLBACKS.values():
        setattr(printer, f"_print_{kind.__name__}", printer._print_Pullback)
    for cls in reductions.REDUCTION_CLASSES:
        setattr(printer, f"_print_{cls.__name__}", printer._print_Reduction)
    for normalization in reductions.NORMALIZATIONS.values():
        setattr(printer, f"_print_{normalization.__name__}", printer._print_Normalization)
