"""The extreme-value check: a generated Function in float32 at ±100, ±30, ±10, ±1e-4, 0 and
±1e-30 (and near the ends of declared domains), against torch in float32 and float64.

A subject is a spec with, where torch has one, its built-in (`torch.softmax`, `torch.exp`).
Its float64 value is the built-in in float64, else autograd of the plain formula (the
`reference` of the spec's generated test) in float64; torch's float32 value is the same
function in float32. Wherever torch's float32 value and the float64 value are finite, the
Function's float32 value must be finite and within

    max(4 * |torch_f32 - f64|, 1e-6 * scale)

of the float64 value, where scale is the condition scale |f| + sum_j |df/dx_j * x_j|. A
gradient component g (a vjp with a fixed cotangent) is judged alike, with scale
|g| + sum_j |dg/dx_j * x_j| from double backward in float64; x_j runs over every element
of every tensor input, differentiable or not (so rounding the inputs is priced in).
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from symgrad.api import generate, load_module, load_spec, spec_from_dict
from symgrad.frontend.model import Spec
from tests.extreme_points import (
    Case,
    elementwise_cases,
    input_points,
    shaped_cases,
)

# How many times torch's own float32 error, and what share of the condition scale, is allowed.
SLACK = 4.0
RELATIVE = 1e-6
# Cotangents of the vjp: exact in float32, of both signs, so that no gradient sums to 0
# by symmetry (the gradient of sum(softmax(x)) is 0 whatever the Function computes).
COTANGENTS = (1.0, -0.5, 0.75, -1.25, 2.0)


@dataclass(frozen=True)
class Subject:
    """A spec and torch's function of the same inputs, where torch has one."""

    name: str
    # A path to a YAML spec, the spec as Python data, or a variant of a spec with options.
    spec: Path | dict[str, Any] | Spec
    # torch's function of the spec's inputs in order (None: the plain formula only).
    builtin: Callable[..., Any] | None = None
    # Every output element depends only on the same element of each input: all points
    # go into one call, on a grid, and the condition scales need no full Jacobian.
    elementwise: bool = False
    # Extra points tried beside STANDARD (and the domain's ends).
    extra_points: tuple[float, ...] = ()
    # The float64 function, where neither the built-in nor the plain formula is accurate
    # in float64 (torch's expm1 backward is result + 1, which is 0 at x = -100).
    exact: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Failure:
    """One value or gradient element out of bounds."""

    subject: str
    point: str
    what: str
    got: float
    reference: float
    bound: float


@dataclass(frozen=True)
class _Functions:
    """What a subject is evaluated with: the Function, torch's function, the inputs."""

    spec: Spec
    generated: Callable[..., Any]
    torch32: Callable[..., Any]
    exact: Callable[..., Any]
    base: tuple[Any, ...]
    differentiable_outputs: tuple[int, ...]


def _load(subject: Subject) -> _Functions:
    """Generate and import the subject's Function and its test's `reference`."""
    if isinstance(subject.spec, Spec):
        spec = subject.spec
    elif isinstance(subject.spec, Path):
        spec = load_spec(subject.spec)
    else:
        spec = spec_from_dict(subject.spec, f"<{subject.name}>")
    module = load_module(spec)
    test_source = generate(spec, "python")[f"test_{spec.module}.py"]
    namespace: dict[str, Any] = {"__name__": f"extreme_test_{spec.module}", "__package__": ""}
    # The generated test imports its module by name (`from softmax import softmax`).
    saved = sys.modules.get(spec.module)
    sys.modules[spec.module] = module
    try:
        exec(compile(test_source, f"<test of {subject.name}>", "exec"), namespace)
    finally:
        if saved is None:
            del sys.modules[spec.module]
        else:
            sys.modules[spec.module] = saved
    reference = namespace["reference"]
    builtin = subject.builtin
    return _Functions(
        spec=spec,
        generated=getattr(module, spec.module),
        torch32=builtin or reference,
        exact=subject.exact or builtin or reference,
        base=namespace["make_inputs"](dtype=torch.float64),
        differentiable_outputs=tuple(namespace["DIFFERENTIABLE_OUTPUTS"]),
    )


def _is_value(item: Any) -> bool:
    """A floating tensor the suite moves to its points; an index input keeps the valid
    indices the generated test drew."""
    return isinstance(item, torch.Tensor) and item.is_floating_point()


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def _cotangent(shape: torch.Size, dtype: torch.dtype, ones: bool) -> torch.Tensor:
    """The vjp's cotangent: ones for elementwise subjects, else COTANGENTS cycled."""
    if ones:
        return torch.ones(shape, dtype=dtype)
    count = math.prod(shape)
    values = [COTANGENTS[n % len(COTANGENTS)] for n in range(count)]
    return torch.tensor(values, dtype=dtype).reshape(shape)


def _with(
    base: tuple[Any, ...],
    tensors: Sequence[torch.Tensor],
    dtype: torch.dtype,
    grad: Callable[[int, torch.Tensor], bool],
) -> list[Any]:
    """`base` with its tensors replaced by `tensors` in `dtype`, as fresh leaves."""
    result: list[Any] = []
    values = iter(tensors)
    for index, item in enumerate(base):
        if _is_value(item):
            value = next(values).to(dtype).detach()
            result.append(value.requires_grad_(grad(index, item)))
        else:
            result.append(item)
    return result


def _run(
    function: Callable[..., Any],
    inputs: list[Any],
    outputs_used: tuple[int, ...],
    ones: bool,
    create_graph: bool = False,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every output, and the vjp of the differentiable ones in each differentiable input."""
    outputs = _as_tuple(function(*inputs))
    used = [outputs[n] for n in outputs_used]
    leaves = [i for i in inputs if isinstance(i, torch.Tensor) and i.requires_grad]
    grads: list[torch.Tensor] = []
    if used and leaves:
        cotangents = [_cotangent(o.shape, o.dtype, ones) for o in used]
        grads = list(
            torch.autograd.grad(
                used,
                leaves,
                cotangents,
                allow_unused=True,
                materialize_grads=True,
                create_graph=create_graph,
            )
        )
    return list(outputs), grads


def subject_cases(subject: Subject, functions: _Functions, limit: int) -> list[Case]:
    """The calls a subject is checked with."""
    tensors = [i for i in functions.spec.inputs if i.is_tensor and not i.is_index]
    points = [input_points(i, subject.extra_points) for i in tensors]
    names = [i.name for i in tensors]
    rng = random.Random(subject.name)
    if subject.elementwise:
        return elementwise_cases(points, names, limit * 100, rng)
    shapes = [b.shape for b in functions.base if _is_value(b)]
    return shaped_cases(shapes, points, names, limit, rng)


def _jacobian_scale(
    function: Callable[..., torch.Tensor], xs: tuple[torch.Tensor, ...], value: torch.Tensor
) -> torch.Tensor:
    """|value| + sum_j |d value / d x_j * x_j| over every element of every input."""
    try:
        jacobians = torch.autograd.functional.jacobian(function, xs, vectorize=True)
    except RuntimeError:
        jacobians = torch.autograd.functional.jacobian(function, xs)
    scale = value.abs()
    for jacobian, x in zip(jacobians, xs, strict=True):
        # A NaN entry (torch's double backward at a tie) adds nothing; the rest stays.
        terms = (jacobian.reshape(value.numel(), -1) * x.reshape(1, -1)).abs()
        scale = scale + terms.nan_to_num(nan=0.0).sum(1)
    return scale


def _scales(functions: _Functions, case: Case, ones: bool) -> list[torch.Tensor]:
    """The condition scale of each output, then of each gradient (float64)."""
    base = functions.base
    where = [n for n, b in enumerate(base) if _is_value(b)]
    wrt = [where.index(n) for n in where if base[n].requires_grad]

    def outputs(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = list(base)
        for n, x in zip(where, xs, strict=True):
            args[n] = x
        return _as_tuple(functions.exact(*args))

    def gradients(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        used = [o for n, o in enumerate(outputs(*xs)) if n in functions.differentiable_outputs]
        if not used or not wrt:
            return ()
        cotangents = [_cotangent(o.shape, o.dtype, ones) for o in used]
        return torch.autograd.grad(
            used,
            [xs[n] for n in wrt],
            cotangents,
            create_graph=True,
            allow_unused=True,
            materialize_grads=True,
        )

    xs = tuple(t.clone().requires_grad_() for t in case.tensors)
    if ones:
        return _elementwise_scales(outputs(*xs), gradients(*xs), xs)
    scales = []
    for part in (outputs, gradients):
        pieces = part(*xs)
        if not pieces:
            continue
        sizes = [p.numel() for p in pieces]

        def flat(*ys: torch.Tensor, part: Callable[..., Any] = part) -> torch.Tensor:
            return torch.cat([p.reshape(-1) for p in part(*ys)])

        vector = flat(*xs).detach()
        scale = _jacobian_scale(flat, tuple(x.detach() for x in xs), vector)
        for piece, chunk in zip(pieces, scale.split(sizes), strict=True):
            scales.append(chunk.reshape(piece.shape))
    return scales


def _elementwise_scales(
    outputs: Sequence[torch.Tensor], gradients: Sequence[torch.Tensor], xs: tuple[torch.Tensor, ...]
) -> list[torch.Tensor]:
    """The condition scales where each element depends on the same element of each input:
    the Jacobian is diagonal, so the gradient of a sum gives it."""
    scales = []
    for value in [*outputs, *gradients]:
        scale = value.detach().abs()
        if not value.requires_grad:  # a constant derivative (2 * x's): no second term
            scales.append(scale)
            continue
        try:
            partials = torch.autograd.grad(
                value.sum(), xs, allow_unused=True, retain_graph=True, materialize_grads=True
            )
        except RuntimeError:  # torch has no double backward (hardsigmoid): |g| alone
            scales.append(scale)
            continue
        for partial, x in zip(partials, xs, strict=True):
            scale = scale + (partial * x).detach().abs().nan_to_num(nan=0.0)
        scales.append(scale)
    return scales


def _compare(
    subject: str,
    case: Case,
    names: list[str],
    got: list[torch.Tensor],
    torch32: list[torch.Tensor],
    exact: list[torch.Tensor],
    scales: list[torch.Tensor],
) -> list[Failure]:
    """The elements where torch's float32 and the float64 value are finite and the
    Function's float32 value is not finite or not within the bound."""
    failures = []
    for what, g, t, e, s in zip(names, got, torch32, exact, scales, strict=True):
        e = e.detach()
        if g.shape != e.shape:
            failures.append(
                Failure(
                    subject,
                    case.name,
                    f"{what} shape {tuple(g.shape)}",
                    math.nan,
                    math.nan,
                    math.nan,
                )
            )
            continue
        g64, t64 = g.detach().double(), t.detach().double()
        judged = torch.isfinite(t64) & torch.isfinite(e)
        bound = torch.maximum(SLACK * (t64 - e).abs(), RELATIVE * s.nan_to_num(nan=0.0))
        bad = judged & ~(torch.isfinite(g64) & ((g64 - e).abs() <= bound))
        for index in bad.nonzero().tolist():
            at = tuple(index)
            point = case.labels[at[0]] if case.labels else f"{case.name} {list(at)}"
            failures.append(
                Failure(subject, point, what, g64[at].item(), e[at].item(), bound[at].item())
            )
    return failures


def check_subject(subject: Subject, limit: int = 200) -> tuple[int, list[Failure]]:
    """How many elements were judged, and the failures, over all of a subject's cases."""
    functions = _load(subject)
    spec = functions.spec
    base = functions.base
    wrt = [n for n, b in enumerate(base) if _is_value(b) and b.requires_grad]
    names = [o.name for o in spec.outputs] + [f"grad {spec.inputs[n].name}" for n in wrt]
    ones = subject.elementwise
    used = functions.differentiable_outputs
    judged, failures = 0, []
    for case in subject_cases(subject, functions, limit):

        def keep(index: int, item: torch.Tensor) -> bool:
            return item.requires_grad

        results = []
        for function, dtype in (
            (functions.generated, torch.float32),
            (functions.torch32, torch.float32),
            (functions.exact, torch.float64),
        ):
            outputs, grads = _run(function, _with(base, case.tensors, dtype, keep), used, ones)
            results.append([*outputs, *grads])
        scales = _scales(functions, case, ones)
        found = _compare(subject.name, case, names, *results, scales)
        judged += sum(int(torch.isfinite(t.detach()).sum()) for t in results[1])
        failures += found
    return judged, failures


def format_failures(failures: Sequence[Failure]) -> str:
    """A table of failures: subject, point, output or gradient, got, reference, bound."""
    header = ("subject", "point", "what", "got", "reference", "bound")
    rows = [header] + [
        (f.subject, f.point, f.what, f"{f.got:.6g}", f"{f.reference:.6g}", f"{f.bound:.3g}")
        for f in failures
    ]
    widths = [min(48, max(len(r[c]) for r in rows)) for c in range(len(header))]
    return "\n".join(
        "  ".join(v[:48].ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows
    )
