"""The subjects of the extreme-value suite: every example, every language function as a
one-line spec, and the idioms issue 28 names, each with torch's built-in where one exists.

KNOWN_FAILING lists the subjects that fail today for a reason being fixed (issue 28's
items); EXCEPTIONS lists the points where a spec's own formula fixes a convention that
torch's built-in does not share, each with its reason.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as nnf

from symgrad.api import load_spec
from symgrad.frontend.options import variants
from symgrad.language import activations, functions, piecewise
from symgrad.language.names import function_names
from tests.extreme_points import NEAR_ONE
from tests.extreme_suite import Failure, Subject

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _torch_function(dotted: str) -> Callable[..., Any]:
    """torch's function named `torch.nn.functional.softplus`, looked up attribute by
    attribute (the names come from symgrad's own tables)."""
    found: Any = torch
    for part in dotted.split(".")[1:]:
        found = getattr(found, part)
    return found  # type: ignore[no-any-return]


def _one_line(
    name: str, expr: str, inputs: tuple[str, ...] = ("x",), **extra: Any
) -> dict[str, Any]:
    """A spec with the one output `y: expr` of tensor inputs."""
    return {
        "name": f"Extreme_{name}".replace("_", ""),
        "inputs": {i: "tensor" for i in inputs},
        "outputs": {"y": expr},
        **extra,
    }


def _rows(name: str, expr: str) -> dict[str, Any]:
    """A one-line spec of x with rows of 4 (reductions along dim=-1)."""
    spec = _one_line(name, expr)
    spec["inputs"] = {"x": {"type": "tensor", "shape": [6, 4]}}
    return spec


# Binary elementwise functions and the one-line spec of each: (expr, builtin).
_BINARY: dict[str, tuple[str, Callable[..., Any]]] = {
    "xlogy": ("xlogy(x, z)", torch.special.xlogy),
    "xlog1py": ("xlog1py(x, z)", torch.special.xlog1py),
    "hypot": ("hypot(x, z)", torch.hypot),
    "atan2": ("atan2(x, z)", torch.atan2),
    "logaddexp": ("logaddexp(x, z)", torch.logaddexp),
}
# Conditionals and kinks: (expr, inputs, builtin).
_CONDITIONALS: dict[str, tuple[str, tuple[str, ...], Callable[..., Any]]] = {
    "where": ("where(x > z, x, 2 * z)", ("x", "z"), lambda x, z: torch.where(x > z, x, 2 * z)),
    "relu": ("relu(x)", ("x",), torch.relu),
    "max": ("max(x, z)", ("x", "z"), torch.maximum),
    "min": ("min(x, z)", ("x", "z"), torch.minimum),
    "clamp": ("clamp(x, lo, hi)", ("x", "lo", "hi"), torch.clamp),
    "Piecewise": (
        "Piecewise((x, x > 0), (2 * z, True))",
        ("x", "z"),
        lambda x, z: torch.where(x > 0, x, 2 * z),
    ),
}
# Constants of the input's dtype: (expr, builtin).
_DTYPE_CONSTANTS: dict[str, tuple[str, Callable[..., Any]]] = {
    "finfo_eps": ("x + finfo_eps(x)", lambda x: x + torch.finfo(x.dtype).eps),
}
# Reductions and normalizations along the last dim of rows of 4: (expr, builtin).
_REDUCTIONS: dict[str, tuple[str, Callable[..., Any]]] = {
    "sum": ("sum(x, dim=-1)", lambda x: torch.sum(x, dim=-1)),
    "mean": ("mean(x, dim=-1, keepdim=True)", lambda x: torch.mean(x, dim=-1, keepdim=True)),
    "logsumexp": ("logsumexp(x, dim=-1)", lambda x: torch.logsumexp(x, dim=-1)),
    "logsumexp_all": ("logsumexp(x)", lambda x: torch.logsumexp(x, dim=tuple(range(x.dim())))),
    "softmax": ("softmax(x, dim=-1)", lambda x: torch.softmax(x, dim=-1)),
    "log_softmax": ("log_softmax(x, dim=-1)", lambda x: torch.log_softmax(x, dim=-1)),
    "layer_norm": ("layer_norm(x, 1e-5)", lambda x: nnf.layer_norm(x, x.shape[-1:], eps=1e-5)),
    "amax": ("amax(x, dim=-1)", lambda x: torch.amax(x, dim=-1)),
    "amin": ("amin(x, dim=-1, keepdim=True)", lambda x: torch.amin(x, dim=-1, keepdim=True)),
    "argmax": (
        "gather(x, -1, argmax(x, -1, keepdim=True))",
        lambda x: torch.gather(x, -1, torch.argmax(x, -1, keepdim=True)),
    ),
    "argmin": (
        "take_along_dim(x, argmin(x, -1, keepdim=True), -1)",
        lambda x: torch.gather(x, -1, torch.argmin(x, -1, keepdim=True)),
    ),
    "max_dim": ("max(x, dim=-1)", lambda x: torch.max(x, -1).values),
    "min_dim": ("min(x, dim=-1, keepdim=True)", lambda x: torch.min(x, -1, keepdim=True).values),
    "cumsum": ("cumsum(x, -1)", lambda x: torch.cumsum(x, -1)),
    "cumprod": ("cumprod(x, -1)", lambda x: torch.cumprod(x, -1)),
    "flip": ("flip(x, -1)", lambda x: torch.flip(x, (-1,))),
    "sort": ("sort(x, -1, descending=True)", lambda x: torch.sort(x, -1, descending=True).values),
    "position": ("x * position(x, -1)", lambda x: x * torch.arange(4, dtype=x.dtype)),
    "reshape": ("reshape(x, [-1, 2])", lambda x: x.reshape(-1, 2)),
    "view": ("view(x, [4, -1])", lambda x: x.reshape(4, -1)),
    "unsqueeze": ("unsqueeze(x, 1) - unsqueeze(x, 0)", lambda x: x[:, None] - x[None]),
    "chunk": ("chunk(x, 2, -1)[0] * chunk(x, 2, -1)[1]", lambda x: x[:, :2] * x[:, 2:]),
    "cat": ("cat([x, x**2], 0)", lambda x: torch.cat([x, x**2], 0)),
    "einsum": ('einsum("ij,kj->ik", x, x)', lambda x: torch.einsum("ij,kj->ik", x, x)),
    "matmul": ("matmul(x, reshape(x, [4, -1]))", lambda x: x @ x.reshape(4, -1)),
}
# Gathers along the last dim of rows of 4 by an index input `i` of shape [6, 2], and
# segment sums of the 6 rows into 3 by an index input `i` of shape [6]:
# (expr, builtin, the index's shape).
_GATHERS: dict[str, tuple[str, Callable[..., Any], list[int]]] = {
    "gather": ("gather(x, -1, i)", lambda x, i: torch.gather(x, -1, i), [6, 2]),
    "take_along_dim": ("take_along_dim(x, i, -1)", lambda x, i: torch.gather(x, -1, i), [6, 2]),
    "segment_sum": (
        "segment_sum(x, i, 0, 3)",
        lambda x, i: x.new_zeros(3, x.shape[1]).index_add(0, i, x),
        [6],
    ),
    "segment_amax": ("segment_amax(x, i, 0, 3)", lambda x, i: _segment_amax(x, i, 3), [6]),
    "index_select": ("index_select(x, 0, i)", lambda x, i: torch.index_select(x, 0, i), [6]),
}


def _segment_amax(x: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Each segment's amax of rows, zero when empty: torch's scatter_reduce gives the same
    values, but its gradient counts the left-out zeros as a tie where a maximum is 0."""
    rows = [
        x[index == s].amax(0) if (index == s).any() else x.new_zeros(x.shape[1:])
        for s in range(size)
    ]
    return torch.stack(rows)


def _expm1(x: torch.Tensor) -> torch.Tensor:
    """expm1 whose float64 derivative is exp(x) itself below -1 (torch's is result + 1)."""
    return torch.where(x < -1, torch.exp(x) - 1, torch.expm1(torch.where(x < -1, 0, x)))


# Float64 functions more accurate than torch's built-in, by language function.
_EXACT: dict[str, Callable[..., Any]] = {"expm1": _expm1}


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) in torch, as Maechler (2012): torch has no function of its own.

    Each form reads only its own side of -ln 2, so that the other's infinite derivative
    (log1p's at x = -1e-30) does not make the float64 gradient NaN (0 * inf).
    """
    near = x > -math.log(2)
    return torch.where(
        near,
        torch.log(-torch.expm1(torch.where(near, x, -1.0))),
        torch.log1p(-torch.exp(torch.where(near, -1.0, x))),
    )


# torch's composition for the language functions torch has no function for.
_COMPOSED: dict[str, Callable[..., Any]] = {"log1mexp": _log1mexp}


def _builtin(info: functions.FunctionInfo) -> Callable[..., Any]:
    """torch's function of a language function, or its composition where torch has none."""
    if info.torch_function is None:
        return _COMPOSED[info.name]
    return _torch_function(info.torch_function)


def language_subjects() -> list[Subject]:
    """Every function of the language as a one-line spec, against torch's built-in."""
    subjects = []
    for name, info in sorted(functions.FUNCTIONS.items()):
        if name == "polygamma":
            for order in (0, 1, 2):
                subjects.append(
                    Subject(
                        f"polygamma_{order}",
                        _one_line(f"polygamma{order}", f"polygamma({order}, x)"),
                        lambda x, n=order: torch.special.polygamma(n, x),
                        True,
                        NEAR_ONE,
                    )
                )
        elif name in _BINARY:
            expr, builtin = _BINARY[name]
            subjects.append(
                Subject(name, _one_line(name, expr, ("x", "z")), builtin, True, NEAR_ONE)
            )
        else:
            subjects.append(
                Subject(
                    name,
                    _one_line(name, f"{name}(x)"),
                    _builtin(info),
                    True,
                    NEAR_ONE,
                    _EXACT.get(name),
                )
            )
    for name, activation in sorted(activations.ACTIVATIONS.items()):
        builtin = _torch_function(activation.torch_function)
        if name == "gelu_tanh":
            builtin = lambda x: nnf.gelu(x, approximate="tanh")  # noqa: E731
        if name in ("huber", "smooth_l1"):  # the loss of x against zeros
            builtin = lambda x, f=builtin: f(x, torch.zeros_like(x), reduction="none")  # noqa: E731
        subjects.append(Subject(name, _one_line(name, f"{name}(x)"), builtin, True, NEAR_ONE))
    for name, (expr, inputs, builtin) in _CONDITIONALS.items():
        subjects.append(Subject(name, _one_line(name, expr, inputs), builtin, True, NEAR_ONE))
    for name, (expr, builtin) in _DTYPE_CONSTANTS.items():
        subjects.append(Subject(name, _one_line(name, expr), builtin, True, NEAR_ONE))
    for name, (expr, builtin) in _REDUCTIONS.items():
        subjects.append(Subject(name, _rows(name, expr), builtin))
    for name, (expr, builtin, index_shape) in _GATHERS.items():
        spec = _rows(name, expr)
        spec["inputs"]["i"] = {"type": "index", "shape": index_shape}
        subjects.append(Subject(name, spec, builtin))
    return subjects


def covered_names() -> set[str]:
    """The language's function names the subjects exercise, aliases included."""
    names = set(functions.FUNCTIONS) | set(_CONDITIONALS) | set(activations.ACTIVATIONS)
    names |= set(_REDUCTIONS) & set(function_names())
    names |= set(_GATHERS) | set(_DTYPE_CONSTANTS)
    aliases = {
        **functions.SPELLINGS,
        **piecewise.CONDITIONAL_ALIASES,
        **activations.ACTIVATION_ALIASES,
    }
    return names | {alias for alias, name in aliases.items() if name in names}


def _cosine_similarity(a: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    return nnf.cosine_similarity(a, b, dim=-1, eps=eps)


def _safe_sinc(x: torch.Tensor) -> torch.Tensor:
    """sin(x) / x as torch's sinc, plus sqrt(x) where x > 0 (the untaken branch guarded)."""
    root = torch.where(x > 0, torch.sqrt(torch.where(x > 0, x, 1)), 0)
    return torch.special.sinc(x / math.pi) + root


# The examples whose formula is a torch built-in: torch's function of the same inputs.
EXAMPLE_BUILTINS: dict[str, Callable[..., Any]] = {
    "bce_with_logits": nnf.binary_cross_entropy_with_logits,
    "cosine_similarity": _cosine_similarity,
    "gelu_tanh": lambda x: nnf.gelu(x, approximate="tanh"),
    "huber_loss": lambda x, t, delta: nnf.huber_loss(x, t, delta=delta),
    "layer_norm": lambda x, eps: nnf.layer_norm(x, x.shape[-1:], eps=eps),
    "layer_norm_affine": lambda x, w, b, eps: nnf.layer_norm(x, x.shape[-1:], w, b, eps=eps),
    "leaky_relu": nnf.leaky_relu,
    "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
    "logsumexp": lambda x: torch.logsumexp(x, dim=-1),
    "mish": nnf.mish,
    "mish_fused": nnf.mish,
    "mse_loss": nnf.mse_loss,
    "rms_norm": lambda x, w, eps: nnf.rms_norm(x, x.shape[-1:], w, eps=eps),
    "rms_norm_op": lambda x, w, eps: nnf.rms_norm(x, x.shape[-1:], w, eps=eps),
    "safe_sinc": _safe_sinc,
    "softmax": lambda x: torch.softmax(x, dim=-1),
}


def example_subjects() -> list[Subject]:
    """Every spec in examples/, against its built-in where torch has one; a spec with
    options is a subject per variant (symgrad.frontend.options), against its formula."""
    subjects = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        found = variants(load_spec(path))
        if found[0].values:
            subjects += [Subject(v.spec.module, v.spec) for v in found]
        else:
            subjects.append(Subject(path.stem, path, EXAMPLE_BUILTINS.get(path.stem)))
    return subjects


class _SourceShare(torch.autograd.Function):
    """a_s / alpha, the source's share of an "over" composite, with its partials in the
    forms that do not cancel: a_d / alpha**2 and -a_s * (1 - a_s) / alpha**2.

    Autograd of the formula as written subtracts two terms of size 1 / alpha: in float64
    they cancel to 0 at a_s = 1e-30, a_d = 0 and take the 1 of d alpha / d a_s with them
    (the float64 reference then says 0 where the derivative is 1). The backward is made of
    differentiable operations, so double backward (the condition scale) goes through it.
    """

    @staticmethod
    def forward(ctx: Any, a_s: torch.Tensor, a_d: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a_s, a_d)
        return a_s / (a_s + a_d * (1 - a_s))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a_s, a_d = ctx.saved_tensors
        alpha = a_s + a_d * (1 - a_s)
        return grad * a_d / alpha / alpha, -grad * a_s * (1 - a_s) / alpha / alpha


def over_exact(
    a_s: torch.Tensor, a_d: torch.Tensor, c_s: torch.Tensor, c_d: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Alpha compositing "over" in float64, written so that autograd does not cancel:
    color = c_d + (c_s - c_d) * a_s / alpha, the same value as the spec's."""
    alpha = a_s + a_d * (1 - a_s)
    return alpha, c_d + (c_s - c_d) * _SourceShare.apply(a_s, a_d)


_UNIT = {"type": "tensor", "domain": [0.0, 1.0]}
# The idioms of issue 28, as users write them: (spec, builtin, elementwise).
_IDIOMS: dict[str, tuple[dict[str, Any], Callable[..., Any] | None, bool]] = {
    "softmax_where": (
        {
            **_rows("softmaxwhere", ""),
            "where": {"ex": "exp(x)"},
            "outputs": {"y": "ex / sum(ex, dim=-1, keepdim=True)"},
        },
        lambda x: torch.softmax(x, dim=-1),
        False,
    ),
    "layer_norm_written": (
        {
            **_rows("layernormwritten", ""),
            "where": {"mu": "mean(x, dim=-1, keepdim=True)", "xc": "x - mu"},
            "outputs": {"y": "xc / sqrt(mean(xc**2, dim=-1, keepdim=True) + 1e-5)"},
        },
        lambda x: nnf.layer_norm(x, x.shape[-1:], eps=1e-5),
        False,
    ),
    "log1p_exp": (_one_line("log1pexp", "log1p(exp(x))"), nnf.softplus, True),
    "softplus_beta": (
        _one_line("softplusbeta", "log1p(exp(2 * x)) / 2"),
        lambda x: nnf.softplus(x, beta=2),
        True,
    ),
    "logaddexp": (
        _one_line("logaddexp", "log(exp(x) + exp(z))", ("x", "z")),
        torch.logaddexp,
        True,
    ),
    # log1mexp's three spellings; each loses precision in part of x < 0 as written.
    "log_one_minus_exp": (_one_line("log1mexpa", "log(1 - exp(x))"), _log1mexp, True),
    "log_minus_expm1": (_one_line("log1mexpb", "log(-expm1(x))"), _log1mexp, True),
    "log1p_minus_exp": (_one_line("log1mexpc", "log1p(-exp(x))"), _log1mexp, True),
    "sinc_pi": (
        _one_line("sincpi", "where(x != 0, sin(pi * x) / (pi * x), 1)"),
        torch.special.sinc,
        True,
    ),
    "elu_expm1": (_one_line("eluexpm1", "where(x > 0, x, expm1(x))"), nnf.elu, True),
    "celu_expm1": (
        _one_line("celuexpm1", "where(x > 0, x, 0.5 * expm1(x / 0.5))"),
        lambda x: nnf.celu(x, alpha=0.5),
        True,
    ),
    "selu_expm1": (
        _one_line(
            "seluexpm1", "1.0507009873554805 * where(x > 0, x, 1.6732632423543772 * expm1(x))"
        ),
        nnf.selu,
        True,
    ),
    "bce_stable": (
        {
            "name": "BceStable",
            "inputs": {"z": "tensor", "t": _UNIT},
            "outputs": {"y": "relu(z) - z * t + log1p(exp(-abs(z)))"},
        },
        lambda z, t: nnf.binary_cross_entropy_with_logits(z, t, reduction="none"),
        True,
    ),
    "alpha_over": (
        {
            "name": "AlphaOver",
            "inputs": {"a_s": _UNIT, "a_d": _UNIT, "c_s": _UNIT, "c_d": _UNIT},
            "where": {"alpha": "a_s + a_d * (1 - a_s)"},
            "outputs": {
                "alpha_out": "alpha",
                "color": "(c_s * a_s + c_d * a_d * (1 - a_s)) / alpha",
            },
        },
        None,
        True,
    ),
}


# Float64 functions more accurate than autograd of the idiom's own formula, by idiom.
_IDIOM_EXACT: dict[str, Callable[..., Any]] = {"alpha_over": over_exact}


def idiom_subjects() -> list[Subject]:
    """The idioms issue 28 found wrong at the edges, against torch's built-in."""
    return [
        Subject(name, spec, builtin, elementwise, exact=_IDIOM_EXACT.get(name))
        for name, (spec, builtin, elementwise) in _IDIOMS.items()
    ]


def all_subjects() -> dict[str, Subject]:
    """Every subject by name: examples as `example/NAME`, idioms as `idiom/NAME`."""
    groups = {
        "example": example_subjects(),
        "function": language_subjects(),
        "idiom": idiom_subjects(),
    }
    return {
        f"{group}/{s.name}": dataclasses.replace(s, name=f"{group}/{s.name}")
        for group, subjects in groups.items()
        for s in subjects
    }


# Points not judged, each with its reason: (subject, what, point as an fnmatch pattern).
# Spec conventions at kinks and ties belong here, and float64 references that torch
# itself computes less accurately than the Function (checked against mpmath).
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("example/gelu_tanh", "*", "x=-10 *"): (
        "reference: torch's float64 gelu(approximate='tanh') rounds 1 + tanh(u) to 0 at "
        "x = -10, where the value is -1.2040923e-37 and the derivative -2.7576381e-36 "
        "(mpmath), as the Function gives"
    ),
    ("example/gelu_tanh", "*", "rows#3 *"): "reference: the rows at -10, as above",
    ("example/bce_with_logits", "loss", "x=-100, t=*"): (
        "reference: torch's float64 binary_cross_entropy_with_logits computes (1 - t) * x "
        "+ max(-x, 0), which cancels to 0 at x = -100 and loses log1p(exp(-100)) and t * 100"
    ),
    ("idiom/bce_stable", "y", "z=-100, t=*"): (
        "reference: torch's float64 binary_cross_entropy_with_logits loses t * 100 and "
        "log1p(exp(-100)) to cancellation at z = -100, as above"
    ),
    ("example/cosine_similarity", "y", "a=*1e-30, b=*1e-30 *"): (
        "spec's order of operations: y = 1.6e-43 is below float32's smallest normal "
        "(1.2e-38), and the spec's sum(a * b) (1e-60 per term) underflows to 0 before the "
        "division that would scale it back; torch's cosine_similarity normalizes a and b "
        "before multiplying. The gradients are judged and pass"
    ),
    ("example/rbf_covariance", "grad *", "x1=-1e-30, x2=-10, *"): (
        "subnormal float32: covar = exp(-96) = 2e-42 is below float32's smallest normal "
        "(1.2e-38), held to about 1 part in 1400, and its gradients (4e-41, 8e-40) are "
        "products of it, each rounding in the subnormal range; the Function's products "
        "in another order than autograd's land 30 subnormal steps (1.4e-45 each) away"
    ),
    ("example/rbf_covariance", "grad *", "x1=10, x2=-0.0001, *"): (
        "subnormal float32: the same distance of 8 per dim (covar = exp(-96)), as above"
    ),
    ("example/edge_softmax", "grad score", "rows#1 *"): (
        "subnormal float32: an edge's softmax share among the mixed rows is below float32's "
        "smallest normal (1.2e-38), and its gradient (5e-45) a product of it, rounding in the "
        "subnormal range; the Function's products in another order than autograd's land a "
        "few subnormal steps (1.4e-45 each) away"
    ),
    ("example/entmax15", "*", "rows#4 *"): (
        "a tie at the support's edge: in the row (-2, ..., -2, 0) every z = -1 equals the "
        "threshold tau = -1 exactly, so p = relu(z - tau)^2 = 0 there and its sensitivity "
        "is 0; tau computed in float32 from the running sums is one float32 step (6e-8) "
        "off, which leaves p = 1.4e-14 and a gradient of 3e-8 at the ties, against a row "
        "whose values and gradients are of order 1 (entmax's own float64 gives 4.9e-32, "
        "not 0, by the same rounding)"
    ),
    ("example/cosine_similarity", "y", "rows#1 *"): (
        "spec's order of operations: the rows of ±1e-30 among the mixed rows, as above"
    ),
}


def excepted(failure: Failure) -> str | None:
    """The reason a failure is a documented exception, or None."""
    for (subject, what, point), reason in EXCEPTIONS.items():
        if (
            subject == failure.subject
            and fnmatch.fnmatchcase(failure.what, what)
            and fnmatch.fnmatchcase(failure.point, point)
        ):
            return reason
    return None


# Subjects that fail today, and why: issue 28's items being fixed, and what the suite
# found beside them. Empty an entry once its fix is merged; the CI test fails while an
# entry of its subset passes (a fix must take its entry out).
KNOWN_FAILING: dict[str, str] = {}

# What CI runs (tests/test_extreme_values.py): subjects quick to check that cover each
# kind (examples with reductions, elementwise functions, kinks, reductions, and the
# idioms of issue 28, which fail until their fixes are merged).
SUBSET = (
    "example/softmax",
    "example/log_softmax",
    "example/logsumexp",
    "example/layer_norm",
    "example/l2_normalize",
    "example/kinked_activation",
    "example/cosine_similarity",
    "example/safe_sinc",
    "function/exp",
    "function/expm1",
    "function/log1p",
    "function/sigmoid",
    "function/softplus",
    "function/tanh",
    "function/sinc",
    "function/xlogy",
    "function/atan2",
    "function/logaddexp",
    "function/elu",
    "function/selu",
    "function/gelu",
    "function/mish",
    "function/max",
    "function/clamp",
    "function/where",
    "function/softmax",
    "function/log_softmax",
    "function/logsumexp",
    "function/log1mexp",
    "idiom/softmax_where",
    "idiom/log1p_exp",
    "idiom/logaddexp",
    "idiom/log_one_minus_exp",
    "idiom/log_minus_expm1",
    "idiom/log1p_minus_exp",
    "idiom/sinc_pi",
    "idiom/elu_expm1",
    "idiom/bce_stable",
)
