"""Time single torch primitives on one device: the cost model behind symgrad's choices.

Each primitive runs on float32 inputs of the run's largest size; times are reported
relative to one elementwise multiplication. On a GPU all of them should cost about one
memory pass; on a CPU thread transcendental functions and general powers cost several.
The names are those of symgrad's cost table (symgrad.ad.costs): `python -m bench
--calibrate` stores these numbers there, and generation reads them.
"""

from __future__ import annotations

import operator
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.measure import time_interleaved
from symgrad.backends.python import kernels
from symgrad.backends.python.spellings import SPELLINGS
from symgrad.language import activations, functions

Tensor = torch.Tensor
aten = torch.ops.aten
Primitive = Callable[[], Tensor]

# Functions timed on (0.05, 0.95) or on (0.5, 1.5) and (1.5, 2.5): their domains.
_UNIT = frozenset({"asin", "acos", "atanh", "erfinv", "logit"})
_POSITIVE = frozenset({"log", "log1p", "sqrt", "rsqrt", "lgamma", "digamma", "xlogy", "xlog1py"})
_ABOVE_ONE = frozenset({"acosh"})
# Timed on (-1.5, -0.5), across log1mexp's switch at -ln 2.
_NEGATIVE = frozenset({"log1mexp"})


@dataclass(frozen=True)
class PrimitiveCost:
    """Median seconds of one primitive, and that over a multiplication's."""

    name: str
    seconds: float
    relative: float


def _arithmetic(x: Tensor, p: Tensor, g: Tensor) -> dict[str, Primitive]:
    """The operators the cost model prices: x normal, p positive, g another operand."""
    return {
        "mul": lambda: x * g,
        "add": lambda: x + g,
        "div": lambda: x / p,
        "square": lambda: x * x,
        "cube": lambda: x**3,
        "pow": lambda: p**2.5,
        "where": lambda: torch.where(x > 0, x, g),
        "addcmul": lambda: torch.addcmul(x, g, p),
        "sum": lambda: x.sum(dim=-1),
        # The kinks of the language (symgrad.language.piecewise), as printed.
        "relu": lambda: torch.relu(x),
        "max": lambda: torch.maximum(x, g),
        "min": lambda: torch.minimum(x, g),
        "clamp": lambda: torch.clamp(x, min=-1.0, max=1.0),
    }


def _calls(x: Tensor, p: Tensor, g: Tensor) -> dict[str, Primitive]:
    """Every language function and activation of one or two tensors, by its torch function."""
    unit, above_one = (p - 0.5) * 0.9 + 0.05, p + 1
    calls: dict[str, Primitive] = {}
    for name, info in functions.FUNCTIONS.items():
        call = _spelled(name) if info.torch_function is None else _resolve(info.torch_function)
        point = unit if name in _UNIT else p if name in _POSITIVE else x
        point = -p if name in _NEGATIVE else point
        point = above_one if name in _ABOVE_ONE else point
        if info.arity == 1:
            calls[name] = _bound(call, point)
        elif info.arity == 2 and name != "polygamma":
            calls[name] = _bound(call, point, p if name in _POSITIVE else g)
    for name, activation in activations.ACTIVATIONS.items():
        if set(activation.nargs) == {1} and name not in calls:
            options = {"approximate": "tanh"} if activation.torch_options else {}
            calls[name] = _bound(_resolve(activation.torch_function), x, **options)
    return calls


def _kernels(x: Tensor, g: Tensor) -> dict[str, Primitive]:
    """torch's backward kernels symgrad calls, and the CPU forms that may replace them."""
    found: dict[str, Primitive] = {
        "tanh_backward": lambda: aten.tanh_backward(g, x),
        "sigmoid_backward": lambda: aten.sigmoid_backward(g, x),
        "silu_backward": lambda: aten.silu_backward(g, x),
        "mish_backward": lambda: aten.mish_backward(g, x),
        "softplus_backward": lambda: aten.softplus_backward(g, x, 1.0, 20.0),
        "gelu_backward": lambda: aten.gelu_backward(g, x),
    }
    for name, form in kernels.CPU_FORMS.items():
        found[f"{name}.cpu_form"] = _form(form, x, g)
    return found


def _form(form: kernels.CpuForm, x: Tensor, grad: Tensor) -> Primitive:
    """A CPU form's statements as a function of x and grad (symgrad's own code, not a spec's)."""
    source = "def run(x, grad):\n" + "".join(f"    {line}\n" for line in form.lines)
    source += f"    return {form.result}\n"
    namespace: dict[str, object] = {"torch": torch}
    exec(source, namespace)
    run = namespace["run"]
    return lambda: run(x, grad)  # type: ignore[operator]


def _resolve(dotted: str) -> Callable[..., Tensor]:
    """`torch.special.erfinv` -> the function."""
    found: Callable[..., Tensor] = operator.attrgetter(dotted.removeprefix("torch."))(torch)
    return found


def _spelled(name: str) -> Callable[..., Tensor]:
    """A function torch lacks (log1mexp), as the generated Python spells it on a tensor."""
    code = compile(SPELLINGS[name].torch.format("t"), f"<{name}>", "eval")
    return lambda t: eval(code, {"torch": torch, "t": t})  # our own table, never a spec


def _bound(call: Callable[..., Tensor], *args: Tensor, **kwargs: str) -> Primitive:
    """`call` bound to its arguments, as a primitive."""
    return lambda: call(*args, **kwargs)


def time_primitives(elements: int, repeats: int, device: torch.device) -> list[PrimitiveCost]:
    """Median time of each primitive on `elements` float32 values, relative to `mul`."""
    torch.manual_seed(0)
    x = torch.randn(max(elements // 1024, 1), 1024, device=device)
    p = torch.rand_like(x) + 0.5
    g = torch.randn_like(x)
    primitives = {**_arithmetic(x, p, g), **_calls(x, p, g), **_kernels(x, g)}
    samples = time_interleaved(primitives, repeats, warmup=2, device=device)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    unit = medians["mul"]
    return [PrimitiveCost(name, seconds, seconds / unit) for name, seconds in medians.items()]
