"""PyTorch's OpInfo samples as symgrad specs: the mapping and the runner.

Each `Mapping` names an op variant of torch's OpInfo database
(`torch.testing._internal.common_methods_invocations.op_db`) and turns one of its
`SampleInput`s into a symgrad spec (a dict for `symgrad.api.spec_from_dict`): tensor
operands become tensor inputs (with the sample's shape), Python numbers become number
inputs, and what the spec language fixes (a reduction's `dim`, polygamma's order) becomes a
literal. A sample the language cannot express (an integer tensor, an unsupported keyword)
is skipped with its reason.

`run_mapping` generates each spec with `symgrad.api.load_module` (cached by spec), and
compares the forward values and a vector-Jacobian product (random cotangent) with the
torch op on the same sample, in float64 and float32, plus gradcheck on a few float64
samples. tests/test_opinfo.py runs it under pytest; tools/opinfo_table.py writes
docs/opinfo.md from it.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from symgrad.api import load_module
from symgrad.errors import SpecError
from symgrad.language import contractions
from symgrad.language.names import function_names

DTYPES: tuple[torch.dtype, ...] = (torch.float64, torch.float32)

# torch.testing.assert_close's defaults, which torch's own OpInfo tests use.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
}
# Gradients compose several rounded operations: float32 gets a few more ulps.
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
}

# Samples per op variant and dtype in a default run; SYMGRAD_OPINFO_ALL=1 runs them all.
DEFAULT_SAMPLES = 6
# float64 samples per op variant that also get gradcheck.
GRADCHECK_SAMPLES = 2


def run_all_samples() -> bool:
    return os.environ.get("SYMGRAD_OPINFO_ALL", "") not in ("", "0")


# ---------------------------------------------------------------------------------------
# What a sample becomes
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A sample's operands: the op's input, positional args and keywords."""

    input: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Case:
    """A spec for one sample, and how the sample's operands become the spec's inputs."""

    spec: dict[str, Any]
    bind: Callable[[Call], dict[str, Any]]


Builder = Callable[[Call, torch.dtype], "Case | str"]


@dataclass(frozen=True)
class OpMapping:
    """One op variant of op_db and how its samples become specs."""

    name: str
    variant: str
    build: Builder
    label: str = ""  # tells apart two mappings of one op variant (e.g. "composite")
    # Functions the spec uses that the language may not have yet: a refusal that names
    # one of them reports the op as not in the language rather than failing.
    future: tuple[str, ...] = ()
    # (rtol, atol) per dtype where torch's own tests loosen theirs.
    tolerances: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    # For an op that returns a tuple (sort's values and indices): the element compared.
    output: int | None = None
    # For an op that returns positions (argmax): compare the input's values there.
    picked: bool = False

    @property
    def key(self) -> str:
        text = self.name + (f".{self.variant}" if self.variant else "")
        return text + (f" [{self.label}]" if self.label else "")


@dataclass(frozen=True)
class P:
    """A parameter of the op: spec symbol, torch keyword, default (`REQUIRED`: none)."""

    symbol: str
    keyword: str = ""
    default: Any = "required"


REQUIRED = "required"


MAX_SHAPE_ELEMENTS = 4096


def _tensor_input(value: torch.Tensor) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "tensor"}
    if value.numel() <= MAX_SHAPE_ELEMENTS and (value.ndim == 0 or value.numel() > 0):
        # `shape` only sets what the generated test samples; the language refuses size 0
        # and sizes over 4096 elements there (the module itself takes any shape).
        entry["shape"] = list(value.shape)
    if not value.requires_grad:
        entry["requires_grad"] = False
    return entry


def _check_number(value: Any) -> str:
    if isinstance(value, bool):
        return f"a bool operand {value}"
    if isinstance(value, (int, float)):
        return ""
    return f"an operand of type {type(value).__name__}"


def _gather(params: Sequence[P], call: Call) -> dict[str, Any] | str:
    """The op's operands by spec symbol, or the reason the call is out of reach."""
    operands: dict[str, Any] = {}
    positional = [call.input, *call.args]
    if len(positional) > len(params):
        return f"{len(positional) - 1} positional args (the mapping takes {len(params) - 1})"
    keywords = {p.keyword: p for p in params if p.keyword}
    for key in call.kwargs:
        if key not in keywords:
            return f"unsupported kwarg {key}={call.kwargs[key]!r}"
    for index, param in enumerate(params):
        if index < len(positional):
            operands[param.symbol] = positional[index]
        elif param.keyword in call.kwargs:
            operands[param.symbol] = call.kwargs[param.keyword]
        elif param.default != REQUIRED:
            operands[param.symbol] = param.default
        else:
            return f"no value for {param.keyword or param.symbol}"
    return operands


def _declare(operands: Mapping[str, Any], dtype: torch.dtype) -> dict[str, Any] | str:
    """Spec inputs for the operands, or the reason one cannot be an input."""
    inputs: dict[str, Any] = {}
    for symbol, value in operands.items():
        if isinstance(value, torch.Tensor):
            if value.is_complex() or not value.is_floating_point():
                return f"a {str(value.dtype).removeprefix('torch.')} tensor operand"
            if value.dtype != dtype:
                return f"a {str(value.dtype).removeprefix('torch.')} operand in a {dtype} sample"
            inputs[symbol] = _tensor_input(value)
        elif value is None:
            return f"{symbol}=None"
        else:
            reason = _check_number(value)
            if reason:
                return reason
            inputs[symbol] = {"type": "float"}
    return inputs


def _spec(inputs: dict[str, Any], expr: str) -> dict[str, Any]:
    return {"name": "Op", "module": "op", "inputs": inputs, "outputs": {"out": expr}}


def _bind_numbers(operands: Mapping[str, Any]) -> dict[str, Any]:
    return {k: float(v) if isinstance(v, (int, float)) else v for k, v in operands.items()}


def ufunc(expr: str, *params: P) -> Builder:
    """An elementwise op written as `expr` over the symbols of `params` (input first)."""
    params = params or (P("x"),)

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        operands = _gather(params, call)
        if isinstance(operands, str):
            return operands
        inputs = _declare(operands, dtype)
        if isinstance(inputs, str):
            return inputs

        def bind(call: Call) -> dict[str, Any]:
            gathered = _gather(params, call)
            assert not isinstance(gathered, str)
            return _bind_numbers(gathered)

        return Case(_spec(inputs, expr), bind)

    return build


def literal(make: Callable[[Call], str | None]) -> Builder:
    """An op of the input alone whose args are literal constants of the expression.

    `make` returns the expression over `x` for the sample's args and kwargs, or None when
    they are out of reach.
    """

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        expr = make(call)
        if expr is None:
            shown = [repr(a) for a in call.args] + [f"{k}={v!r}" for k, v in call.kwargs.items()]
            return f"constants out of reach: {', '.join(shown)}"
        inputs = _declare({"x": call.input}, dtype)
        if isinstance(inputs, str):
            return inputs
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


def _dims(value: Any, ndim: int) -> list[int] | str | None:
    """A reduction's dims as the language takes them (None: all dims)."""
    if value is None:
        return None
    dims = [value] if isinstance(value, int) else list(value)
    if not dims:
        return None  # torch reduces over every dim for dim=()
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return f"dim={value!r}"
    if any(d < 0 for d in dims) and any(d >= 0 for d in dims):
        # The language takes dims of one sign; the spec is for this sample's ndim anyway.
        dims = [d % max(ndim, 1) for d in dims]
    return dims


def reduction(function: str, *, softmax: bool = False, negate: bool = False) -> Builder:
    """sum/mean/logsumexp/amax/amin(x, dim, keepdim) or softmax/log_softmax(x, dim[, dtype])."""

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        x = call.input
        names = ("dim", "dtype") if softmax else ("dim", "keepdim")
        values: dict[str, Any] = dict(zip(names, call.args, strict=False))
        if len(call.args) > len(names):
            return f"{len(call.args)} positional args"
        for key, value in call.kwargs.items():
            if key not in names:
                return f"unsupported kwarg {key}={value!r}"
            values[key] = value
        if values.get("dtype") not in (None, dtype):
            return f"dtype={values['dtype']} (a cast)"
        inputs = _declare({"x": x}, dtype)
        if isinstance(inputs, str):
            return inputs
        dims = _dims(values.get("dim"), x.ndim)
        if isinstance(dims, str):
            return dims
        arg = "-x" if negate else "x"
        if softmax:
            if dims is None or len(dims) != 1:
                return f"dim={values.get('dim')!r}"
            expr = f"{function}({arg}, dim={dims[0]})"
        else:
            keepdim = bool(values.get("keepdim", False))
            dim_text = "" if dims is None else f", dim={dims if len(dims) > 1 else dims[0]}"
            keep_text = ", keepdim=True" if keepdim else ""
            expr = f"{function}({arg}{dim_text}{keep_text})"
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


def extremum_along_builder(function: str) -> Builder:
    """argmax/argmin(x, dim, keepdim) as the values at its positions (`picked`), or the
    values of max/min(x, dim, keepdim) (Note [Arg extrema]); one dim, never None."""

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        values: dict[str, Any] = dict(zip(("dim", "keepdim"), call.args, strict=False))
        values.update(call.kwargs)
        if set(values) - {"dim", "keepdim"} or len(call.args) > 2:
            return f"operands {describe_call(call)}"
        if not isinstance(values.get("dim"), int) or call.input.ndim == 0:
            return "no dim, or a 0-d input (over every element)"
        inputs = _declare({"x": call.input}, dtype)
        if isinstance(inputs, str):
            return inputs
        dim, keepdim = values["dim"], bool(values.get("keepdim", False))
        kept = ", keepdim=True" if keepdim else ""
        if function in ("max", "min"):
            expr = f"{function}(x, dim={dim}{kept})"
        else:
            gathered = f"gather(x, {dim}, {function}(x, {dim}, keepdim=True))"
            expr = gathered if keepdim else f"sum({gathered}, dim={dim})"
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


def _picked(call: Call, positions: torch.Tensor) -> torch.Tensor:
    """The input's values at the positions an argmax/argmin sample returned."""
    values: dict[str, Any] = dict(zip(("dim", "keepdim"), call.args, strict=False))
    values.update(call.kwargs)
    dim = values["dim"]
    kept = positions if values.get("keepdim") else positions.unsqueeze(dim)
    picked = torch.gather(call.input, dim, kept)
    return picked if values.get("keepdim") else picked.squeeze(dim)


def where_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """OpInfo's where(input, condition, other) = torch.where(condition, input, other)."""
    if len(call.args) != 2 or call.kwargs:
        return "unexpected operands"
    condition = call.args[0]
    if not isinstance(condition, torch.Tensor) or condition.dtype != torch.bool:
        return "a non-bool condition"
    inputs = _declare({"x": call.input, "y": call.args[1]}, dtype)
    if isinstance(inputs, str):
        return inputs
    # The bool condition is a 0/1 tensor input of the sample's dtype, without gradient.
    inputs = {"c": {**_tensor_input(condition), "requires_grad": False}, **inputs}

    def bind(call: Call) -> dict[str, Any]:
        return {"c": call.args[0].to(dtype), "x": call.input, "y": call.args[1]}

    return Case(_spec(inputs, "where(c > 0.5, x, y)"), bind)


def clamp_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """clamp(x, min, max) with either bound None: max(x, lo) or min(x, hi) then."""
    operands = _gather((P("x"), P("lo", "min", None), P("hi", "max", None)), call)
    if isinstance(operands, str):
        return operands
    lo, hi = operands["lo"], operands["hi"]
    present = {k: v for k, v in operands.items() if v is not None}
    if lo is not None and hi is not None:
        if isinstance(lo, torch.Tensor) != isinstance(hi, torch.Tensor):
            return "one bound a tensor, the other a number"
        expr = "clamp(x, lo, hi)"
    elif lo is not None:
        expr = "max(x, lo)"
    elif hi is not None:
        expr = "min(x, hi)"
    else:
        return "no bound"
    inputs = _declare(present, dtype)
    if isinstance(inputs, str):
        return inputs

    def bind(call: Call) -> dict[str, Any]:
        gathered = _gather((P("x"), P("lo", "min", None), P("hi", "max", None)), call)
        assert not isinstance(gathered, str)
        return _bind_numbers({k: v for k, v in gathered.items() if v is not None})

    return Case(_spec(inputs, expr), bind)


def prelu_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """prelu's weight of shape [C] scales dim 1: it becomes a [C, 1, ...] tensor input."""
    operands = _gather((P("x"), P("w", "weight")), call)
    if isinstance(operands, str):
        return operands
    x, w = operands["x"], operands["w"]

    def shaped(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if w.numel() == 1:
            return w.reshape(())  # one slope for all channels: the output keeps x's shape
        if w.ndim == 1 and x.ndim >= 2:
            return w.reshape(-1, *([1] * (x.ndim - 2)))
        return w

    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        return "a number operand"
    inputs = _declare({"x": x, "w": shaped(x, w)}, dtype)
    if isinstance(inputs, str):
        return inputs

    def bind(call: Call) -> dict[str, Any]:
        gathered = _gather((P("x"), P("w", "weight")), call)
        assert not isinstance(gathered, str)
        return {"x": gathered["x"], "w": shaped(gathered["x"], gathered["w"])}

    return Case(_spec(inputs, "where(x > 0, x, w * x)"), bind)


def _cosine_norm(x: str, dim: int) -> str:
    return f"max(sqrt(sum({x}**2, dim={dim}, keepdim=True)), eps)"


def cosine_similarity_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """cosine_similarity as ATen computes it: each operand over its clamped norm, then summed.

    ATen clamps the norms under no_grad, so where 0 < norm < eps its gradient still runs
    through the norm; the spec's `max` follows the formula (no sample has such a norm).
    torch broadcasts the operands before the norms: where that broadcast spans the reduced
    dim, the sample's operands are expanded first (torch's expand sums their gradients).
    """
    params = (P("x1"), P("x2"), P("dim", "dim", 1), P("eps", "eps", 1e-8))
    operands = _gather(params, call)
    if isinstance(operands, str):
        return operands
    x1, x2, dim = operands["x1"], operands["x2"], operands["dim"]
    if not isinstance(x1, torch.Tensor) or not isinstance(x2, torch.Tensor):
        return "a number operand"
    shape = torch.broadcast_shapes(x1.shape, x2.shape)
    expand = any(_spans(x.shape, shape, dim) for x in (x1, x2))
    tensors = {k: operands[k].expand(shape) if expand else operands[k] for k in ("x1", "x2")}
    inputs = _declare({**tensors, "eps": operands["eps"]}, dtype)
    if isinstance(inputs, str):
        return inputs
    normalized = f"(x1 / {_cosine_norm('x1', dim)}) * (x2 / {_cosine_norm('x2', dim)})"

    def bind(call: Call) -> dict[str, Any]:
        gathered = _gather(params, call)
        assert not isinstance(gathered, str)
        bound = {k: gathered[k].expand(shape) if expand else gathered[k] for k in ("x1", "x2")}
        return {**bound, "eps": float(gathered["eps"])}

    return Case(_spec(inputs, f"sum({normalized}, dim={dim})"), bind)


def _spans(own: torch.Size, shape: torch.Size, dim: int) -> bool:
    """Whether broadcasting `own` to `shape` spans `dim` (of `shape`)."""
    if not shape:
        return False
    index = dim % len(shape) - (len(shape) - len(own))
    return index < 0 or own[index] != shape[dim % len(shape)]


def gather_builder(take_along_dim: bool) -> Builder:
    """gather(x, dim, index) or take_along_dim(x, indices, dim): the index an index input.

    take_along_dim broadcasts its operands and wraps negative indices, which gather does
    not: a sample whose shapes differ outside dim is out of reach, as is one with a
    negative index or without dim (over the flattened input).
    """

    def operands(call: Call) -> tuple[Any, Any] | str:
        params = ("indices", "dim") if take_along_dim else ("dim", "index")
        given = dict(zip(params, call.args, strict=False))
        if len(call.args) > 2 or set(call.kwargs) - {"dim"} or ("dim" in given and call.kwargs):
            return f"operands {describe_call(call)}"
        given.update(call.kwargs)
        index, dim = given.get(params[0 if take_along_dim else 1]), given.get("dim")
        if not isinstance(dim, int) or not isinstance(index, torch.Tensor):
            return f"dim={dim!r}"
        return dim, index

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        found = operands(call)
        if isinstance(found, str):
            return found
        dim, index = found
        x = call.input
        if index.numel() == 0 or index.numel() > MAX_SHAPE_ELEMENTS:
            return f"an index of shape {list(index.shape)}"
        if index.dtype not in (torch.int64, torch.int32):
            return f"a {str(index.dtype).removeprefix('torch.')} index"
        if bool((index < 0).any()):
            # take_along_dim wraps negative indices; the language's (gather's) take 0..n-1.
            return "a negative index"
        if take_along_dim and any(
            n != dim % max(x.ndim, 1) and a != b
            for n, (a, b) in enumerate(zip(x.shape, index.shape, strict=False))
        ):
            return "operands take_along_dim broadcasts"
        inputs = _declare({"x": x}, dtype)
        if isinstance(inputs, str):
            return inputs
        inputs["i"] = {"type": "index", "shape": list(index.shape)}
        expr = f"take_along_dim(x, i, dim={dim})" if take_along_dim else f"gather(x, {dim}, i)"

        def bind(call: Call) -> dict[str, Any]:
            bound = operands(call)
            assert not isinstance(bound, str)
            return {"x": call.input, "i": bound[1]}

        return Case(_spec(inputs, expr), bind)

    return build


def index_select_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """index_select(x, dim, index): the index a 1-d index input; torch also takes a 0-d
    value (as one of one element), which the language refuses."""
    x = call.input
    if call.kwargs or len(call.args) != 2 or not isinstance(call.args[0], int):
        return f"operands {describe_call(call)}"
    dim, index = call.args
    if not isinstance(index, torch.Tensor) or index.ndim != 1 or index.numel() == 0:
        return f"operands {describe_call(call)}"
    if x.ndim == 0:
        return "a 0-d value"
    inputs = _declare({"x": x}, dtype)
    if isinstance(inputs, str):
        return inputs
    inputs["i"] = {"type": "index", "shape": list(index.shape)}
    return Case(
        _spec(inputs, f"index_select(x, {dim}, i)"),
        lambda call: {"x": call.input, "i": call.args[1]},
    )


def class_loss_builder(log_softmax: bool) -> Builder:
    """nn.functional.cross_entropy (log_softmax) or nll_loss of logits [N, C] against
    class indices [N]: the target an index input, compared (symgrad's class targets).

    Out of reach: an input of another rank (a [C] input's 0-d target, [N, C, d...]
    inputs), probabilities as targets, label_smoothing with weight, and a weight beside
    a target out of 0..C-1 (ignore_index -1): gather reads the weight of every row.
    """

    def options(call: Call) -> dict[str, Any] | str:
        known = {"weight", "ignore_index", "reduction", "label_smoothing"}
        if len(call.args) != 1 or set(call.kwargs) - known:
            return f"operands {describe_call(call)}"
        return {
            "weight": call.kwargs.get("weight"),
            "ignore": call.kwargs.get("ignore_index", -100),
            "reduction": call.kwargs.get("reduction", "mean"),
            "smoothing": call.kwargs.get("label_smoothing", 0.0),
        }

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        found, x = options(call), call.input
        if isinstance(found, str):
            return found
        target, weight = call.args[0], found["weight"]
        if not log_softmax and found["smoothing"]:
            return "label_smoothing of nll_loss"
        if not isinstance(target, torch.Tensor) or target.dtype != torch.int64:
            return "probabilities as targets"
        if x.ndim != 2:
            return f"an input of shape {list(x.shape)}: class targets of [N, C] logits only"
        if weight is not None and (found["smoothing"] or bool((target < 0).any())):
            return "weight with label_smoothing or a negative target"
        operands = {"x": x} if weight is None else {"x": x, "w": weight}
        inputs = _declare(operands, dtype)
        if isinstance(inputs, str):
            return inputs
        inputs["t"] = {"type": "index", "shape": list(target.shape)}
        return Case(_spec(inputs, _class_loss(log_softmax, weight is not None, found)), bind)

    def bind(call: Call) -> dict[str, Any]:
        bound = {"x": call.input, "t": call.args[0]}
        if call.kwargs.get("weight") is not None:
            bound["w"] = call.kwargs["weight"]
        return bound

    return build


def _class_loss(log_softmax: bool, weighted: bool, found: Mapping[str, Any]) -> str:
    """The spec of a cross entropy or nll loss per row, reduced as torch reduces it."""
    valid = f"t != {int(found['ignore'])}"
    safe = f"where({valid}, t, 0)"  # an ignored row gathers a real class, then is masked
    picked = f"sum(gather(x, -1, unsqueeze({safe}, -1)), dim=-1)"
    lse = "logsumexp(x, dim=-1)" if log_softmax else "0"
    smoothing = float(found["smoothing"])
    row = f"({lse} - {picked})"
    if smoothing:
        row = f"({1 - smoothing!r} * {row} + {smoothing!r} * ({lse} - mean(x, dim=-1)))"
    scale = f"gather(w, 0, {safe})" if weighted else "1"
    losses = f"where({valid}, {scale} * {row}, 0)"
    if found["reduction"] == "none":
        return losses
    if found["reduction"] == "sum":
        return f"sum({losses})"
    return f"sum({losses}) / sum(where({valid}, {scale}, 0))"


def pointwise_loss_builder(function: str, keyword: str) -> Builder:
    """nn.functional.huber_loss or smooth_l1_loss(input, target, reduction, delta/beta):
    the language's function of the difference, reduced as torch reduces it."""
    params = (P("x"), P("t", "target"), P("r", "reduction", "mean"), P("p", keyword, 1.0))

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        operands = _gather(params, call)
        if isinstance(operands, str):
            return operands
        reduced = {"none": "{}", "sum": "sum({})", "mean": "mean({})"}[operands.pop("r")]
        inputs = _declare(operands, dtype)
        if isinstance(inputs, str):
            return inputs

        def bind(call: Call) -> dict[str, Any]:
            gathered = _gather(params, call)
            assert not isinstance(gathered, str)
            gathered.pop("r")
            return _bind_numbers(gathered)

        return Case(_spec(inputs, reduced.format(f"{function}(x - t, p)")), bind)

    return build


def layer_norm_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """nn.functional.layer_norm(input, normalized_shape, weight, bias, eps): layer_norm(x,
    eps) over the last dim, times the weight and plus the bias where given."""
    params = (P("x"), P("n", "normalized_shape"), P("w", "weight", None), P("b", "bias", None))
    params += (P("eps", "eps", 1e-5),)
    operands = _gather(params, call)
    if isinstance(operands, str):
        return operands
    if len(operands.pop("n")) != 1:
        return "normalized over several dims (the language normalises the last one)"
    if dtype == torch.float32 and operands["x"].shape[-1:] == (1,):
        # The exact gradient of a row of one is 0 (torch's in float64 too, which the
        # float64 run compares); torch's float32 kernel rounds it to about rstd * 4e-7.
        return "a row of one element in float32: torch's kernel rounds its zero gradient"
    given = {k: v for k, v in operands.items() if v is not None}
    inputs = _declare(given, dtype)
    if isinstance(inputs, str):
        return inputs
    expr = (
        "layer_norm(x, eps)" + (" * w" if "w" in given else "") + (" + b" if "b" in given else "")
    )

    def bind(call: Call) -> dict[str, Any]:
        gathered = _gather(params, call)
        assert not isinstance(gathered, str)
        gathered.pop("n")
        return _bind_numbers({k: v for k, v in gathered.items() if v is not None})

    return Case(_spec(inputs, expr), bind)


def view_builder(method: str) -> Builder:
    """reshape(x, shape), view(x, shape) or unsqueeze(x, dim) (symgrad.language.views).

    The language takes a shape as a list of positive sizes (one may be -1) and a tensor
    with elements: a size 0, a 0-d result or a shape given as separate ints is refused.
    """

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        x = call.input
        if call.kwargs or len(call.args) != 1 or not isinstance(x, torch.Tensor):
            return f"operands {describe_call(call)}"
        inputs = _declare({"x": x}, dtype)
        if isinstance(inputs, str):
            return inputs
        if "shape" not in inputs["x"] or x.numel() == 0:
            return f"a tensor of shape {list(x.shape)}"
        (given,) = call.args
        if method == "unsqueeze":
            if not isinstance(given, int):
                return f"dim={given!r}"
            expr = f"unsqueeze(x, {given})"
        else:
            sizes = [given] if isinstance(given, int) else list(given)
            if not sizes or any(n < 1 and n != -1 for n in sizes):
                return f"shape {sizes}"
            expr = f"{method}(x, {sizes})"
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


def cat_builder(call: Call, dtype: torch.dtype) -> Case | str:
    """cat(tensors, dim=0) (symgrad.language.views): empty pieces are out of reach."""
    tensors, dim = call.input, call.kwargs.get("dim", call.args[0] if call.args else 0)
    if not isinstance(tensors, (list, tuple)) or len(call.args) + len(call.kwargs) > 1:
        return f"operands {describe_call(call)}"
    if any(t.numel() == 0 for t in tensors):
        return "an empty piece"
    names = [f"x{n}" for n in range(len(tensors))]
    inputs = _declare(dict(zip(names, tensors, strict=True)), dtype)
    if isinstance(inputs, str):
        return inputs
    expr = f"cat([{', '.join(names)}], {dim})"
    return Case(_spec(inputs, expr), lambda call: dict(zip(names, call.input, strict=True)))


def chunk_builder(piece: int) -> Builder:
    """chunk(x, chunks, dim=0)[piece]: the language's chunks divide their dim evenly."""

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        values = _keywords(call, ("chunks", "dim"))
        if isinstance(values, str):
            return values
        x, chunks, dim = call.input, values["chunks"], values.get("dim", 0)
        if x.ndim == 0 or x.shape[dim] % chunks:
            return f"{chunks} chunks of size {x.shape[dim] if x.ndim else 0}: uneven pieces"
        inputs = _declare({"x": x}, dtype)
        if isinstance(inputs, str):
            return inputs
        expr = f"chunk(x, {chunks}, {dim})[{piece % chunks}]"
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


# The letters of matmul's batch dims, apart from its matrix letters i, j, k.
_BATCH_LETTERS = "pqrstuvw"


def _matmul_subscripts(x: torch.Tensor, y: torch.Tensor) -> str | None:
    """torch.matmul's product as einsum subscripts; None where it broadcasts batch dims."""
    if x.ndim == 1 and y.ndim == 1:
        return "j,j->"
    left = "j" if x.ndim == 1 else _BATCH_LETTERS[: x.ndim - 2] + "ij"
    right = "j" if y.ndim == 1 else _BATCH_LETTERS[: y.ndim - 2] + "jk"
    batch_x, batch_y = x.shape[:-2] if x.ndim > 2 else (), y.shape[:-2] if y.ndim > 2 else ()
    if batch_x and batch_y and batch_x != batch_y:
        return None
    batch = _BATCH_LETTERS[: max(len(batch_x), len(batch_y))]
    output = batch + ("i" if x.ndim > 1 else "") + ("k" if y.ndim > 1 else "")
    return f"{left},{right}->{output}"


def _fits(subscripts: str, operands: Sequence[torch.Tensor]) -> bool:
    """Whether each letter has one size (einsum broadcasts size-1 dims; the language not)."""
    sizes: dict[str, int] = {}
    parts = subscripts.split("->")[0].split(",")
    for part, operand in zip(parts, operands, strict=True):
        for letter, size in zip(part, operand.shape, strict=True):
            if sizes.setdefault(letter, size) != size:
                return False
    return True


def contraction_builder(kind: str) -> Builder:
    """matmul, mm (products of two tensors) or einsum (equation, list of operands)."""

    def operands(call: Call) -> tuple[str, list[torch.Tensor]] | str:
        if kind == "einsum":
            if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
                return f"operands {describe_call(call)}"
            tensors = list(call.input)
            try:
                contractions.parse_subscripts(call.args[0], len(tensors))
            except contractions.SubscriptError as error:
                return f"subscripts {call.args[0]!r}: {error}"
            return call.args[0], tensors
        if len(call.args) != 1 or call.kwargs:
            return f"operands {describe_call(call)}"
        x, y = call.input, call.args[0]
        subscripts = _matmul_subscripts(x, y) if kind == "matmul" else contractions.MATMUL
        return subscripts or "batch dims matmul broadcasts", [x, y]

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        found = operands(call)
        if isinstance(found, str):
            return found
        subscripts, tensors = found
        if "->" not in subscripts:
            return subscripts
        if any(t.numel() == 0 for t in tensors):
            return "an empty operand"
        if not _fits(subscripts, tensors):
            return "size-1 dims einsum broadcasts"
        names = [f"x{n}" for n in range(len(tensors))]
        inputs = _declare(dict(zip(names, tensors, strict=True)), dtype)
        if isinstance(inputs, str):
            return inputs
        if subscripts == contractions.MATMUL:
            expr = f"matmul({', '.join(names)})"
        else:
            expr = f'einsum("{subscripts}", {", ".join(names)})'

        def bind(call: Call) -> dict[str, Any]:
            bound = operands(call)
            assert not isinstance(bound, str)
            return dict(zip(names, bound[1], strict=True))

        return Case(_spec(inputs, expr), bind)

    return build


def _keywords(call: Call, names: Sequence[str]) -> dict[str, Any] | str:
    """The sample's args and kwargs by the op's parameter names (a reason if others)."""
    values: dict[str, Any] = dict(zip(names, call.args, strict=False))
    if len(call.args) > len(names):
        return f"{len(call.args)} positional args"
    for key, value in call.kwargs.items():
        if key not in names or key in values:
            return f"unsupported kwarg {key}={value!r}"
        values[key] = value
    return values


def along_builder(name: str) -> Builder:
    """cumsum(x, dim[, dtype]), cumprod(x, dim[, dtype]), flip(x, dims) (one flip per
    dim; fliplr and flipud as flip(x, 1) and flip(x, 0)), sort(x, dim=-1,
    descending=False)'s values and msort(x).

    A sort with stable=True is out of reach: the language's sort is torch's default, whose
    order among ties (and so the gradient there) may differ."""
    names = {
        "cumsum": ("dim", "dtype"),
        "cumprod": ("dim", "dtype"),
        "flip": ("dims",),
        "sort": ("dim", "descending"),
    }

    def build(call: Call, dtype: torch.dtype) -> Case | str:
        values = _keywords(call, (*names.get(name, ()), "stable"))
        if isinstance(values, str):
            return values
        if values.pop("stable", False):
            return "stable=True (the language's sort is torch's default)"
        if values.get("dtype") not in (None, dtype):
            return f"dtype={values['dtype']} (a cast)"
        inputs = _declare({"x": call.input}, dtype)
        if isinstance(inputs, str):
            return inputs
        expr = _along_expr(name, values)
        if expr is None:
            return f"operands {describe_call(call)}"
        return Case(_spec(inputs, expr), lambda call: {"x": call.input})

    return build


def _along_expr(name: str, values: Mapping[str, Any]) -> str | None:
    """The spec's expression over x for an along_builder op, or None when out of reach."""
    if name in ("cumsum", "cumprod"):
        return f"{name}(x, {values['dim']})" if isinstance(values.get("dim"), int) else None
    if name in ("fliplr", "flipud", "flip"):
        dims = {"fliplr": [1], "flipud": [0]}.get(name, values.get("dims"))
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        if not dims:
            return None  # no flip: the input itself
        expr = "x"
        for dim in dims:
            expr = f"flip({expr}, {dim})"
        return expr
    dim, descending = values.get("dim", 0 if name == "msort" else -1), values.get("descending")
    return f"sort(x, dim={dim}, descending={bool(descending)})"


def _int_arg(call: Call) -> int | None:
    if len(call.args) == 1 and isinstance(call.args[0], int) and not call.kwargs:
        return int(call.args[0])
    return None


def _polygamma_expr(call: Call) -> str | None:
    n = _int_arg(call)
    return None if n is None or n < 0 else f"polygamma({n}, x)"


def _mvlgamma_expr(call: Call) -> str | None:
    p = _int_arg(call)
    if p is None or p < 1:
        return None
    terms = " + ".join(f"lgamma(x - {j / 2!r})" for j in range(p))
    return f"{p * (p - 1) / 4!r} * log(pi) + {terms}"


def _ufuncs(names: str) -> list[OpMapping]:
    """Unary ops whose spec is the language function of the same name."""
    return [OpMapping(name, "", ufunc(f"{name}(x)")) for name in names.split()]


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_X = P("x")
_Y = P("y", "other")
_ADDC = (P("y", "tensor1"), P("z", "tensor2"), P("value", "value", 1.0))

# Activations, each checked twice: as the language's function, and composed of others.
_ACTIVATIONS: list[tuple[str, str, str, tuple[P, ...]]] = [
    # (op name, language form, composite form, params)
    ("nn.functional.silu", "silu(x)", "x * sigmoid(x)", ()),
    ("nn.functional.mish", "mish(x)", "x * tanh(softplus(x))", ()),
    (
        "nn.functional.elu",
        "elu(x, alpha)",
        "where(x > 0, x, alpha * expm1(x))",
        (_X, P("alpha", "alpha", 1.0)),
    ),
    (
        "nn.functional.celu",
        "celu(x, alpha)",
        "where(x > 0, x, alpha * expm1(x / alpha))",
        (_X, P("alpha", "alpha", 1.0)),
    ),
    (
        "nn.functional.selu",
        "selu(x)",
        f"{SELU_SCALE!r} * where(x > 0, x, {SELU_ALPHA!r} * expm1(x))",
        (),
    ),
    ("nn.functional.softsign", "softsign(x)", "x / (1 + abs(x))", ()),
    ("nn.functional.tanhshrink", "tanhshrink(x)", "x - tanh(x)", ()),
    (
        "nn.functional.leaky_relu",
        "leaky_relu(x, slope)",
        "where(x > 0, x, slope * x)",
        (_X, P("slope", "negative_slope", 0.01)),
    ),
    ("nn.functional.hardsigmoid", "hardsigmoid(x)", "clamp(x / 6 + 0.5, 0, 1)", ()),
    ("nn.functional.hardswish", "hardswish(x)", "x * clamp(x + 3, 0, 6) / 6", ()),
    (
        "nn.functional.hardshrink",
        "hardshrink(x, lambd)",
        "where((x > lambd) or (x < -lambd), x, 0)",
        (_X, P("lambd", "lambd", 0.5)),
    ),
    (
        "nn.functional.softshrink",
        "softshrink(x, lambd)",
        "where(x > lambd, x - lambd, where(x < -lambd, x + lambd, 0))",
        (_X, P("lambd", "lambd", 0.5)),
    ),
]


def _gelu(approximate: bool) -> str:
    if approximate:
        return "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))"
    return "x * (1 + erf(x / sqrt(2))) / 2"


def _gelu_expr(future: bool) -> Callable[[Call], str | None]:
    def make(call: Call) -> str | None:
        approximate = call.kwargs.get("approximate", "none")
        if call.args or set(call.kwargs) - {"approximate"}:
            return None
        if approximate not in ("none", "tanh"):
            return None
        if future:
            return "gelu(x)" if approximate == "none" else "gelu_tanh(x)"
        return _gelu(approximate == "tanh")

    return make


def _round_expr(call: Call) -> str | None:
    decimals = call.kwargs.get("decimals", 0)
    if call.args or set(call.kwargs) - {"decimals"} or not isinstance(decimals, int):
        return None
    if decimals == 0:
        return "round(x)"
    if decimals > 0:
        return f"round(x * {10**decimals}) / {10**decimals}"
    return f"round(x / {10**-decimals}) * {10**-decimals}"


def _float32_only_float64(builder: Builder, reason: str) -> Builder:
    def build(call: Call, dtype: torch.dtype) -> Case | str:
        return reason if dtype != torch.float64 else builder(call, dtype)

    return build


_LOOSE32 = {torch.float32: (1e-3, 1e-4)}

MAPPINGS: list[OpMapping] = [
    # Unary functions of the language.
    *_ufuncs(
        "abs acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh exp expm1 log"
        " log1p sqrt rsqrt sigmoid erf erfc erfinv lgamma digamma sign sinc floor ceil"
    ),
    OpMapping("round", "", literal(_round_expr)),
    OpMapping("round", "decimals_0", literal(_round_expr)),
    OpMapping("round", "decimals_3", literal(_round_expr)),
    OpMapping("round", "decimals_neg_3", literal(_round_expr)),
    OpMapping("sgn", "", ufunc("sign(x)")),
    OpMapping("logit", "", ufunc("logit(x)")),
    OpMapping("nn.functional.logsigmoid", "", ufunc("log_sigmoid(x)")),
    OpMapping("nn.functional.relu", "", ufunc("relu(x)")),
    # Unary ops as formulas.
    OpMapping("neg", "", ufunc("-x")),
    OpMapping("positive", "", ufunc("x")),
    OpMapping("reciprocal", "", ufunc("1 / x")),
    OpMapping("square", "", ufunc("x**2")),
    OpMapping("exp2", "", ufunc("2**x")),
    OpMapping("log2", "", ufunc("log(x) / log(2)")),
    OpMapping("log10", "", ufunc("log(x) / log(10)")),
    OpMapping("deg2rad", "", ufunc("x * pi / 180")),
    OpMapping("rad2deg", "", ufunc("x * 180 / pi")),
    OpMapping("trunc", "", ufunc("where(x >= 0, floor(x), ceil(x))")),
    OpMapping("frac", "", ufunc("x - where(x >= 0, floor(x), ceil(x))")),
    OpMapping("special.ndtr", "", ufunc("(1 + erf(x / sqrt(2))) / 2")),
    OpMapping("polygamma", "polygamma_n_0", literal(_polygamma_expr)),
    OpMapping("polygamma", "polygamma_n_1", literal(_polygamma_expr), tolerances=_LOOSE32),
    OpMapping("polygamma", "polygamma_n_2", literal(_polygamma_expr), tolerances=_LOOSE32),
    OpMapping("polygamma", "polygamma_n_3", literal(_polygamma_expr), tolerances=_LOOSE32),
    OpMapping("polygamma", "polygamma_n_4", literal(_polygamma_expr), tolerances=_LOOSE32),
    OpMapping("mvlgamma", "mvlgamma_p_1", literal(_mvlgamma_expr)),
    OpMapping("mvlgamma", "mvlgamma_p_3", literal(_mvlgamma_expr)),
    OpMapping("mvlgamma", "mvlgamma_p_5", literal(_mvlgamma_expr)),
    # Binary ops.
    OpMapping("add", "", ufunc("x + alpha * y", _X, _Y, P("alpha", "alpha", 1.0))),
    OpMapping("sub", "", ufunc("x - alpha * y", _X, _Y, P("alpha", "alpha", 1.0))),
    OpMapping("rsub", "", ufunc("y - alpha * x", _X, _Y, P("alpha", "alpha", 1.0))),
    OpMapping("mul", "", ufunc("x * y", _X, _Y)),
    OpMapping("div", "no_rounding_mode", ufunc("x / y", _X, _Y)),
    OpMapping("true_divide", "", ufunc("x / y", _X, _Y)),
    OpMapping("pow", "", ufunc("x**y", _X, P("y", "exponent"))),
    OpMapping(
        "float_power",
        "",
        _float32_only_float64(
            ufunc("x**y", _X, P("y", "exponent")), "float_power computes in float64"
        ),
    ),
    OpMapping("__radd__", "", ufunc("y + x", _X, _Y)),
    OpMapping("__rsub__", "", ufunc("y - x", _X, _Y)),
    OpMapping("__rmul__", "", ufunc("y * x", _X, _Y)),
    OpMapping("__rdiv__", "", ufunc("y / x", _X, _Y)),
    OpMapping("__rpow__", "", ufunc("y**x", _X, _Y)),
    OpMapping("atan2", "", ufunc("atan2(x, y)", _X, _Y)),
    OpMapping("hypot", "", ufunc("hypot(x, y)", _X, _Y)),
    OpMapping("xlogy", "", ufunc("xlogy(x, y)", _X, _Y)),
    OpMapping("special.xlog1py", "", ufunc("xlog1py(x, y)", _X, _Y)),
    OpMapping("maximum", "", ufunc("max(x, y)", _X, _Y)),
    OpMapping("minimum", "", ufunc("min(x, y)", _X, _Y)),
    OpMapping("max", "binary", ufunc("max(x, y)", _X, _Y)),
    OpMapping("min", "binary", ufunc("min(x, y)", _X, _Y)),
    OpMapping("clamp_min", "", ufunc("max(x, y)", _X, P("y", "min"))),
    OpMapping("clamp_max", "", ufunc("min(x, y)", _X, P("y", "max"))),
    OpMapping("copysign", "", ufunc("where(y >= 0, abs(x), -abs(x))", _X, _Y)),
    OpMapping("logaddexp", "", ufunc("logaddexp(x, y)", _X, _Y)),
    OpMapping(
        "logaddexp",
        "",
        ufunc("max(x, y) + log1p(exp(-abs(x - y)))", _X, _Y),
        label="composite",
    ),
    OpMapping(
        "logaddexp2",
        "",
        ufunc("max(x, y) + log1p(2**(-abs(x - y))) / log(2)", _X, _Y),
    ),
    OpMapping("heaviside", "", ufunc("where(x == 0, y, where(x > 0, 1, 0))", _X, P("y", "values"))),
    # Ternary ops.
    OpMapping(
        "addcmul",
        "",
        ufunc("x + value * y * z", _X, *_ADDC),
    ),
    OpMapping(
        "addcdiv",
        "",
        ufunc("x + value * y / z", _X, *_ADDC),
    ),
    OpMapping("lerp", "", ufunc("x + w * (y - x)", _X, P("y", "end"), P("w", "weight"))),
    OpMapping("where", "", where_builder),
    OpMapping("gather", "", gather_builder(take_along_dim=False)),
    OpMapping("take_along_dim", "", gather_builder(take_along_dim=True)),
    OpMapping("index_select", "", index_select_builder),
    OpMapping("nn.functional.cross_entropy", "", class_loss_builder(log_softmax=True)),
    OpMapping("nn.functional.nll_loss", "", class_loss_builder(log_softmax=False)),
    OpMapping("nn.functional.huber_loss", "", pointwise_loss_builder("huber", "delta")),
    OpMapping("nn.functional.smooth_l1_loss", "", pointwise_loss_builder("smooth_l1", "beta")),
    OpMapping("nn.functional.layer_norm", "", layer_norm_builder),
    OpMapping("reshape", "", view_builder("reshape")),
    OpMapping("view", "", view_builder("view")),
    OpMapping("unsqueeze", "", view_builder("unsqueeze")),
    OpMapping("cat", "", cat_builder),
    OpMapping("chunk", "", chunk_builder(0), label="first piece", output=0),
    OpMapping("chunk", "", chunk_builder(-1), label="last piece", output=-1),
    OpMapping("cumsum", "", along_builder("cumsum")),
    OpMapping("cumprod", "", along_builder("cumprod")),
    OpMapping("flip", "", along_builder("flip")),
    OpMapping("fliplr", "", along_builder("fliplr")),
    OpMapping("flipud", "", along_builder("flipud")),
    OpMapping("sort", "", along_builder("sort"), output=0),
    OpMapping("msort", "", along_builder("msort")),
    OpMapping("nn.functional.cosine_similarity", "", cosine_similarity_builder),
    OpMapping("clamp", "", clamp_builder),
    # Activations of torch.nn.functional.
    OpMapping(
        "nn.functional.hardtanh",
        "",
        ufunc("hardtanh(x, lo, hi)", _X, P("lo", "min_val", -1.0), P("hi", "max_val", 1.0)),
    ),
    OpMapping(
        "nn.functional.hardtanh",
        "",
        ufunc("clamp(x, lo, hi)", _X, P("lo", "min_val", -1.0), P("hi", "max_val", 1.0)),
        label="composite",
    ),
    OpMapping("nn.functional.relu6", "", ufunc("relu6(x)")),
    OpMapping("nn.functional.relu6", "", ufunc("clamp(x, 0, 6)"), label="composite"),
    OpMapping(
        "nn.functional.softplus",
        "",
        ufunc(
            "where(beta * x > threshold, x, softplus(beta * x) / beta)",
            _X,
            P("beta", "beta", 1.0),
            P("threshold", "threshold", 20.0),
        ),
    ),
    OpMapping(
        "nn.functional.threshold",
        "",
        ufunc("where(x > t, x, v)", _X, P("t", "threshold"), P("v", "value")),
    ),
    OpMapping("nn.functional.prelu", "", prelu_builder),
    OpMapping("nn.functional.gelu", "", literal(_gelu_expr(True)), future=("gelu", "gelu_tanh")),
    OpMapping("nn.functional.gelu", "", literal(_gelu_expr(False)), label="composite"),
    *[
        mapping
        for name, future, composite, params in _ACTIVATIONS
        for mapping in (
            OpMapping(name, "", ufunc(future, *params), future=(future.split("(")[0],)),
            OpMapping(name, "", ufunc(composite, *params), label="composite"),
        )
    ],
    # Reductions.
    OpMapping("sum", "", reduction("sum")),
    OpMapping("mean", "", reduction("mean")),
    OpMapping("logsumexp", "", reduction("logsumexp")),
    OpMapping("amax", "", reduction("amax")),
    OpMapping("amin", "", reduction("amin")),
    OpMapping("argmax", "", extremum_along_builder("argmax"), picked=True),
    OpMapping("argmin", "", extremum_along_builder("argmin"), picked=True),
    OpMapping("max", "reduction_with_dim", extremum_along_builder("max"), output=0),
    OpMapping("min", "reduction_with_dim", extremum_along_builder("min"), output=0),
    OpMapping("softmax", "", reduction("softmax", softmax=True)),
    OpMapping("softmax", "with_dtype", reduction("softmax", softmax=True)),
    OpMapping("log_softmax", "", reduction("log_softmax", softmax=True)),
    OpMapping("log_softmax", "with_dtype", reduction("log_softmax", softmax=True)),
    # Contractions.
    OpMapping("matmul", "", contraction_builder("matmul")),
    OpMapping("mm", "", contraction_builder("mm")),
    OpMapping("einsum", "", contraction_builder("einsum")),
    OpMapping("nn.functional.softmin", "", reduction("softmax", softmax=True, negate=True)),
    OpMapping(
        "nn.functional.softmin", "with_dtype", reduction("softmax", softmax=True, negate=True)
    ),
]


# ---------------------------------------------------------------------------------------
# Running the samples
# ---------------------------------------------------------------------------------------


@dataclass
class SampleResult:
    dtype: torch.dtype
    index: int
    status: str  # "pass", "fail: ...", "skipped: ..."


@dataclass
class OpResult:
    key: str
    results: list[SampleResult]

    @property
    def samples(self) -> int:
        return len(self.results)

    @property
    def passes(self) -> int:
        return sum(r.status == "pass" for r in self.results)

    @property
    def failures(self) -> list[SampleResult]:
        return [r for r in self.results if r.status.startswith("fail")]

    @property
    def status(self) -> str:
        if self.failures:
            return self.failures[0].status
        if self.passes:
            return "pass"
        reasons = [r.status for r in self.results]
        return reasons[0] if reasons else "skipped: no samples"


_MODULES: dict[str, ModuleType | SpecError] = {}


def _module(spec: dict[str, Any]) -> ModuleType:
    key = json.dumps(spec, sort_keys=True)
    if key not in _MODULES:
        try:
            _MODULES[key] = load_module(spec)
        except SpecError as error:
            _MODULES[key] = error
    cached = _MODULES[key]
    if isinstance(cached, SpecError):
        raise cached
    return cached


def op_info(mapping: OpMapping) -> Any:
    from torch.testing._internal.common_methods_invocations import op_db

    for op in op_db:
        if op.name == mapping.name and op.variant_test_name == mapping.variant:
            return op
    raise LookupError(f"{mapping.name}.{mapping.variant} is not in op_db")


def samples(op: Any, dtype: torch.dtype) -> list[Any]:
    """The op's samples for dtype, deterministically (torch's sample makers draw randoms)."""
    if dtype not in op.supported_dtypes("cpu"):
        return []
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(op.sample_inputs("cpu", dtype, requires_grad=True))


def select(count: int, limit: int) -> list[int]:
    """`limit` indices spread evenly over range(count), deterministically."""
    if count <= limit:
        return list(range(count))
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        small = value.numel() <= 4
        text = str(value.detach().tolist()) if small else f"tensor{list(value.shape)}"
        return text if value.is_floating_point() else f"{text}:{value.dtype}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    return repr(value)


def describe_call(call: Call) -> str:
    parts = [describe(call.input), *(describe(a) for a in call.args)]
    parts += [f"{k}={describe(v)}" for k, v in call.kwargs.items()]
    return ", ".join(parts)


def _first_mismatch(
    actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> str | None:
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)} vs torch {list(expected.shape)}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} vs torch {expected.dtype}"
    a, e = actual.detach(), expected.detach()
    close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    index = tuple(int(i) for i in (~close).nonzero()[0])
    return (
        f"at {list(index)}: symgrad {a[index].item()!r} vs torch {e[index].item()!r}"
        f" ({int((~close).sum())} of {close.numel()} differ)"
    )


def _leaves(call: Call) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    values = [call.input, *call.args, *call.kwargs.values()]
    if isinstance(call.input, (list, tuple)):  # einsum's operands
        values[:1] = call.input
    for value in values:
        tensor = isinstance(value, torch.Tensor) and value.requires_grad
        if tensor and not any(value is seen for seen in found):
            found.append(value)
    return found


def _grads(output: torch.Tensor, leaves: list[torch.Tensor], cot: torch.Tensor) -> list[Any]:
    grads = torch.autograd.grad(output, leaves, cot, allow_unused=True)
    pairs = zip(grads, leaves, strict=True)
    return [torch.zeros_like(leaf) if g is None else g for g, leaf in pairs]


def run_sample(
    mapping: OpMapping, op: Any, sample: Any, dtype: torch.dtype, index: int, gradcheck: bool
) -> str:
    """ "pass", "skipped: reason" or "fail: reason" for one sample."""
    call = Call(sample.input, tuple(sample.args), dict(sample.kwargs))
    case = mapping.build(call, dtype)
    if isinstance(case, str):
        return f"skipped: {case}"
    where = f"{str(dtype).removeprefix('torch.')} sample {index} ({describe_call(call)})"
    try:
        module = _module(case.spec)
    except SpecError as error:
        missing = [name for name in mapping.future if name not in function_names()]
        if missing:
            return f"skipped: not in the language ({', '.join(missing)})"
        return f"fail: symgrad refused the spec {case.spec['outputs']['out']!r}: {error}"
    except Exception as error:
        return f"fail: symgrad could not generate {case.spec['outputs']['out']!r}: {error!r}"
    function = getattr(module, case.spec["module"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = op(call.input, *call.args, **call.kwargs)
        if mapping.output is not None:
            expected = expected[mapping.output]
        if mapping.picked:
            expected = _picked(call, expected)
    except Exception as error:
        return f"skipped: torch raises {type(error).__name__}"
    if not isinstance(expected, torch.Tensor):
        return "skipped: torch returns no tensor"
    expr = case.spec["outputs"]["out"]
    try:
        actual = function(**case.bind(call))
    except Exception as error:
        return f"fail: {where}: {expr!r} raised {error!r}"
    rtol, atol = mapping.tolerances.get(dtype, TOLERANCES[dtype])
    mismatch = _first_mismatch(actual, expected, rtol, atol)
    if mismatch:
        return f"fail: {where}: forward {expr!r} {mismatch}"
    leaves = _leaves(call)
    if not op.supports_autograd or not leaves or not expected.requires_grad:
        return "pass"
    generator = torch.Generator().manual_seed(1000 + index)
    cot = torch.randn(expected.shape, generator=generator, dtype=torch.float64).to(dtype)
    try:
        want = _grads(expected, leaves, cot)
    except RuntimeError:
        return "pass"  # torch has no backward for this sample: forward only
    try:
        got = _grads(actual, leaves, cot)
    except Exception as error:
        return f"fail: {where}: backward of {expr!r} raised {error!r}"
    rtol, atol = mapping.tolerances.get(dtype, GRAD_TOLERANCES[dtype])
    for number, (g, w) in enumerate(zip(got, want, strict=True)):
        mismatch = _first_mismatch(g, w, rtol, atol)
        if mismatch:
            return f"fail: {where}: vjp of {expr!r} w.r.t. operand {number} {mismatch}"
    finite = bool(expected.isfinite().all()) and all(bool(w.isfinite().all()) for w in want)
    if gradcheck and finite and all(leaf.numel() > 0 for leaf in leaves):
        reason = _gradcheck(function, case, call, leaves)
        if reason:
            return f"fail: {where}: gradcheck of {expr!r}: {reason}"
    return "pass"


def _substitute(call: Call, leaves: Sequence[torch.Tensor], new: Sequence[torch.Tensor]) -> Call:
    def swap(value: Any) -> Any:
        for old, replacement in zip(leaves, new, strict=True):
            if value is old:
                return replacement
        return value

    operand = call.input
    return Call(
        [swap(v) for v in operand] if isinstance(operand, (list, tuple)) else swap(operand),
        tuple(swap(a) for a in call.args),
        {k: swap(v) for k, v in call.kwargs.items()},
    )


def _gradcheck(
    function: Callable[..., torch.Tensor], case: Case, call: Call, leaves: list[torch.Tensor]
) -> str:
    def run(*tensors: torch.Tensor) -> torch.Tensor:
        return function(**case.bind(_substitute(call, leaves, tensors)))

    inputs = tuple(leaf.detach().clone().requires_grad_(True) for leaf in leaves)
    try:
        torch.autograd.gradcheck(run, inputs, raise_exception=True)
    except Exception as error:
        return str(error).strip().splitlines()[0]
    return ""


def run_mapping(mapping: OpMapping, all_samples: bool | None = None) -> OpResult:
    """Every (or a deterministic subset of every) sample of the op, in each dtype."""
    all_samples = run_all_samples() if all_samples is None else all_samples
    op = op_info(mapping)
    results: list[SampleResult] = []
    for dtype in DTYPES:
        found = samples(op, dtype)
        chosen = range(len(found)) if all_samples else select(len(found), DEFAULT_SAMPLES)
        checked = 0
        for index in chosen:
            gradcheck = dtype == torch.float64 and checked < GRADCHECK_SAMPLES
            status = run_sample(mapping, op, found[index], dtype, index, gradcheck)
            if gradcheck and status == "pass":
                checked += 1  # (a sample gradcheck skipped for non-finite values counts too)
            results.append(SampleResult(dtype, index, status))
    return OpResult(mapping.key, results)


def iter_mappings() -> Iterator[OpMapping]:
    yield from MAPPINGS


def unmapped_ops() -> list[str]:
    """op_db's op variants that no mapping claims."""
    from torch.testing._internal.common_methods_invocations import op_db

    claimed = {(m.name, m.variant) for m in MAPPINGS}
    names = {
        op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        for op in op_db
        if (op.name, op.variant_test_name) not in claimed
    }
    return sorted(names)
