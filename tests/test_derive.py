"""Reverse-mode differentiation: correct gradients, what is saved, how work is guarded.

The gradients symgrad derives are evaluated the way the generated backward runs them:
printed with TorchPrinter and evaluated with torch, in a namespace holding only what the
forward saved. They are compared with `sympy.diff` of the whole formula, written with
sympy's own functions and evaluated with numpy, at random points.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy
import torch

import symgrad
from symgrad.ad import costs, reuse, saving
from symgrad.ad.derive import derive
from symgrad.ad.ir import Assignment, Derived, GuardedBlock
from symgrad.backends.python import kernels
from symgrad.backends.python.printer import TorchPrinter
from symgrad.frontend.domains import default_domain, default_shape
from symgrad.frontend.model import Input, InputType, Output, Spec
from symgrad.frontend.options import variants
from symgrad.language import (
    contractions,
    dtypes,
    functions,
    indexing,
    piecewise,
    reductions,
    scans,
    segments,
    views,
)
from symgrad.language.activations import Activation

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _sigmoid(a: sympy.Expr) -> sympy.Expr:
    return 1 / (1 + sympy.exp(-a))


# Each language function written with sympy's own functions, independently of its rule.
SYMPY_EQUIVALENTS: dict[str, Callable[..., sympy.Expr]] = {
    "exp": sympy.exp,
    "log": sympy.log,
    "log1p": lambda a: sympy.log(1 + a),
    "expm1": lambda a: sympy.exp(a) - 1,
    "sqrt": sympy.sqrt,
    "rsqrt": lambda a: 1 / sympy.sqrt(a),
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "tanh": sympy.tanh,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "asin": sympy.asin,
    "acos": sympy.acos,
    "atan": sympy.atan,
    "asinh": sympy.asinh,
    "acosh": sympy.acosh,
    "atanh": sympy.atanh,
    "sigmoid": _sigmoid,
    "softplus": lambda a: sympy.log(1 + sympy.exp(a)),
    "log_sigmoid": lambda a: -sympy.log(1 + sympy.exp(-a)),
    "abs": sympy.Abs,
    "sign": sympy.sign,
    "erf": sympy.erf,
    "erfc": sympy.erfc,
    "erfinv": sympy.erfinv,
    "lgamma": sympy.loggamma,
    "digamma": sympy.digamma,
    "polygamma": sympy.polygamma,
    "xlogy": lambda a, b: a * sympy.log(b),
    "xlog1py": lambda a, b: a * sympy.log(1 + b),
    "logit": lambda a: sympy.log(a / (1 - a)),
    "hypot": lambda a, b: sympy.sqrt(a**2 + b**2),
    "atan2": sympy.atan2,
    "logaddexp": lambda a, b: sympy.log(sympy.exp(a) + sympy.exp(b)),
    "log1mexp": lambda a: sympy.log(1 - sympy.exp(a)),
    "floor": sympy.floor,
    "ceil": sympy.ceiling,
    "round": lambda a: sympy.floor(a + sympy.Rational(1, 2)),  # derivative checks only
    "sinc": lambda a: sympy.sin(sympy.pi * a) / (sympy.pi * a),
}


def _through_torch(function: Callable[..., torch.Tensor]) -> Callable[..., np.ndarray]:
    """A numpy version of a torch.special function (numpy alone has none of these)."""
    return lambda *args: function(*(torch.as_tensor(a, dtype=torch.float64) for a in args)).numpy()


_NUMPY = [
    {
        "erf": np.vectorize(math.erf),
        "erfc": np.vectorize(math.erfc),
        "erfinv": _through_torch(torch.special.erfinv),
        "loggamma": _through_torch(torch.special.gammaln),
        "digamma": _through_torch(torch.special.digamma),
        "polygamma": lambda n, a: _through_torch(lambda t: torch.special.polygamma(int(n), t))(a),
    },
    "numpy",
]


def test_every_function_has_a_sympy_equivalent() -> None:
    assert set(SYMPY_EQUIVALENTS) == set(functions.FUNCTIONS)


# --- Building and evaluating --------------------------------------------------------


def make_spec(
    outputs: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    where: Mapping[str, Any] | None = None,
    name: str = "Case",
) -> Spec:
    data: dict[str, Any] = {"name": name, "inputs": dict(inputs or {"x": "tensor"})}
    if where:
        data["where"] = dict(where)
    data["outputs"] = dict(outputs)
    return symgrad.spec_from_dict(data)


def to_sympy(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with every symgrad function replaced by its sympy equivalent."""
    # The kinks' values written with where, exact away from ties (where the samples are).
    where, gt, lt = piecewise.where, piecewise.Gt, piecewise.Lt
    kinks = {
        piecewise.Relu: lambda x: where(gt(x, 0), x, 0),
        piecewise.Maximum: lambda a, b: where(gt(a, b), a, where(lt(a, b), b, (a + b) / 2)),
        piecewise.Minimum: lambda a, b: where(lt(a, b), a, where(gt(a, b), b, (a + b) / 2)),
        piecewise.Clamp: lambda x, lo, hi: where(lt(x, lo), lo, where(gt(x, hi), hi, x)),
    }
    # Activations are their value formulas, which may use the kinks above.
    expr = expr.replace(lambda e: isinstance(e, Activation), lambda e: e.expanded())
    expr = expr.replace(lambda e: type(e) in kinks, lambda e: kinks[type(e)](*e.args))
    expr = expr.replace(
        lambda e: isinstance(e, piecewise.Where),
        lambda e: sympy.Piecewise((e.args[1], e.args[0]), (e.args[2], True)),
    )
    return expr.replace(
        lambda e: isinstance(e, functions.ElementwiseFunction),
        lambda e: SYMPY_EQUIVALENTS[type(e).__name__](*e.args),
    )


def full_formula(spec: Spec, output: Output) -> sympy.Expr:
    """The output in terms of inputs only: every `where` name substituted."""
    expr = output.expr
    for item in reversed(spec.intermediates):
        expr = expr.xreplace({item.symbol: item.expr})
    assert expr.free_symbols <= {i.symbol for i in spec.inputs}
    return expr


def expected_partial(spec: Spec, output: Output, item: Input) -> sympy.Expr:
    """d output / d input by sympy, or the spec's override of it, over inputs only."""
    if not output.differentiable:
        return sympy.Integer(0)
    override = spec.override(output, item)
    if override is None:
        return sympy.diff(to_sympy(full_formula(spec, output)), item.symbol)
    outputs = {o.symbol: o.expr for o in spec.outputs}
    return to_sympy(
        full_formula(spec, dataclasses.replace(output, expr=override.expr.xreplace(outputs)))
    )


def sample_inputs(spec: Spec, seed: int) -> dict[str, Any]:
    """Tensors (float64) in each input's test domain; numbers at their defaults."""
    generator = torch.Generator().manual_seed(seed)
    shape = default_shape(spec)
    values: dict[str, Any] = {}
    for item in spec.inputs:
        if item.is_tensor:
            low, high = default_domain(item)
            size = item.shape if item.shape is not None else shape
            uniform = torch.rand(size, generator=generator, dtype=torch.float64)
            values[item.name] = low + (high - low) * uniform
        elif item.default is not None:
            values[item.name] = item.default
        else:
            values[item.name] = {InputType.FLOAT: 0.7, InputType.INT: 2, InputType.BOOL: True}[
                item.type
            ]
    return values


def _sum_to(value: torch.Tensor, shape: torch.Size, frame: torch.Size) -> torch.Tensor:
    """The generated modules' helper (templates/python/function.py.jinja), for SumTo."""
    return value.expand(frame).sum_to_size(shape)


# The backward-kernel helpers of generated modules, as a bare TorchPrinter names them.
_KERNEL_HELPERS = {
    f"_{kernels.helper_role(name)}": eval(
        "lambda grad, point: " + kernel.call.format(grad="grad", point="point"), {"torch": torch}
    )
    for name, kernel in kernels.KERNELS.items()
}
# The forward helpers (activations with a CPU form), as torch's own function.
_KERNEL_HELPERS.update(
    {f"_{name}": getattr(torch.nn.functional, name) for name in kernels.FORWARD_FORMS}
)


def evaluate(code: str, namespace: Mapping[str, Any]) -> Any:
    helpers = {"torch": torch, "math": math, "_sum_to": _sum_to, **_KERNEL_HELPERS}
    return eval(code, helpers, dict(namespace))


def shape_facts(derived: Derived, forward: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the backward's shape facts, computed as setup_context does."""
    definitions = {a.target: a.expr for a in derived.forward}
    shapes = reductions.Shapes(definitions, {i.symbol for i in derived.spec.tensor_inputs})
    values: dict[str, Any] = {}
    for fact in derived.shape_facts:
        argument = evaluate(
            TorchPrinter(derived.tensor_symbols).doprint(fact.expr.argument), forward
        )
        shape = torch.as_tensor(argument).shape
        assert shapes.of(fact.expr.argument) is not None or shape == torch.Size([])
        if isinstance(fact.expr, reductions.Count):
            dims = fact.expr.dims or range(len(shape))
            values[fact.target.name] = math.prod(shape[d] for d in dims) if shape else 1
        else:
            values[fact.target.name] = shape
    return values


def run(statements: Iterable[Assignment], printer: TorchPrinter, env: dict[str, Any]) -> None:
    for statement in statements:
        env[statement.target.name] = evaluate(printer.doprint(statement.expr), env)


def run_forward(derived: Derived, inputs: Mapping[str, Any]) -> dict[str, Any]:
    env = dict(inputs)
    run(derived.forward, TorchPrinter(derived.tensor_symbols), env)
    return env


def _guarded(blocks: Iterable[GuardedBlock], need: set[str]) -> list[Assignment]:
    return [
        statement
        for block in blocks
        if any(i.name in need for i in block.inputs)
        for statement in block.statements
    ]


def run_backward(
    derived: Derived,
    forward: Mapping[str, Any],
    seeds: Mapping[str, torch.Tensor | None],
    need: set[str],
) -> dict[str, torch.Tensor | None]:
    """Run the backward as generated code does, reading only what the forward saved."""
    printer = TorchPrinter(derived.tensor_symbols)
    env: dict[str, Any] = {s.name: forward[s.name] for s in derived.saved_tensors}
    env.update({i.name: forward[i.name] for i in derived.saved_numbers})
    env.update(shape_facts(derived, forward))
    run(_guarded(derived.prelude, need), printer, env)
    grads: dict[str, torch.Tensor | None] = {i.name: None for i in derived.spec.inputs}
    for part in derived.backward:
        seed = seeds[part.output.name]
        if seed is None:
            continue
        local = dict(env, **{part.grad.name: seed})
        run(_guarded(part.shared, need), printer, local)
        for gradient in part.gradients:
            name = gradient.input.name
            if name not in need:
                continue
            scope = dict(local)
            run(gradient.statements, printer, scope)
            term = evaluate(printer.doprint(gradient.expr), scope)
            term = torch.broadcast_to(torch.as_tensor(term, dtype=torch.float64), seed.shape)
            term = term.sum_to_size(forward[name].shape)
            previous = grads[name]
            grads[name] = term if previous is None else previous + term
    return grads


def reference_gradients(
    spec: Spec, inputs: Mapping[str, Any], seeds: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """sum over outputs of seed * d output / d input, by sympy.diff and numpy."""
    symbols = [i.symbol for i in spec.inputs]
    arguments = [inputs[i.name].numpy() if i.is_tensor else inputs[i.name] for i in spec.inputs]
    result = {}
    for item in spec.differentiable_inputs:
        total = torch.zeros_like(inputs[item.name])
        for output in spec.outputs:
            seed = seeds[output.name]
            derivative = expected_partial(spec, output, item)
            value = sympy.lambdify(symbols, derivative, modules=_NUMPY)(*arguments)
            value = np.broadcast_to(np.asarray(value, dtype=np.float64), tuple(seed.shape))
            total = total + (torch.from_numpy(value.copy()) * seed).sum_to_size(total.shape)
        result[item.name] = total
    return result


def check_gradients(spec: Spec, seed: int = 0) -> Derived:
    """Check forward values and every input gradient against sympy, for every guard."""
    # numpy evaluates both sides of a Piecewise: the untaken one may warn (sqrt(-1)).
    with np.errstate(invalid="ignore", divide="ignore"):
        return _check_gradients(spec, seed)


def _check_gradients(spec: Spec, seed: int) -> Derived:
    derived = derive(spec)
    inputs = sample_inputs(spec, seed)
    forward = run_forward(derived, inputs)
    symbols = [i.symbol for i in spec.inputs]
    arguments = [inputs[i.name].numpy() if i.is_tensor else inputs[i.name] for i in spec.inputs]
    for output in spec.outputs:
        expected = sympy.lambdify(symbols, to_sympy(full_formula(spec, output)), _NUMPY)
        value = np.broadcast_to(expected(*arguments), tuple(forward[output.name].shape))
        torch.testing.assert_close(forward[output.name], torch.from_numpy(value.copy()))
    generator = torch.Generator().manual_seed(seed + 1)
    seeds = {
        o.name: torch.randn(forward[o.name].shape, generator=generator, dtype=torch.float64)
        for o in spec.outputs
    }
    expected_grads = reference_gradients(spec, inputs, seeds)
    differentiable = [i.name for i in spec.differentiable_inputs]
    everything = run_backward(derived, forward, seeds, set(differentiable))
    for name in differentiable:
        actual = everything[name]
        if actual is None:  # no gradient at all: it must be zero
            assert torch.count_nonzero(expected_grads[name]) == 0, name
            continue
        torch.testing.assert_close(actual, expected_grads[name], msg=lambda m, n=name: f"{n}: {m}")
    # The docstring's partial derivatives, evaluated with the forward's values.
    printer = TorchPrinter(derived.tensor_symbols)
    for (output_name, input_name), partial in derived.partials.items():
        if partial is None:  # too long for the docstring
            continue
        (output,) = [o for o in spec.outputs if o.name == output_name]
        item = next(i for i in spec.inputs if i.name == input_name)
        derivative = expected_partial(spec, output, item)
        want = sympy.lambdify(symbols, derivative, _NUMPY)(*arguments)
        shape = tuple(forward[output_name].shape)
        want = torch.from_numpy(np.broadcast_to(np.asarray(want, dtype=np.float64), shape).copy())
        value = evaluate(printer.doprint(partial), forward)
        value = torch.broadcast_to(torch.as_tensor(value, dtype=torch.float64), shape)
        torch.testing.assert_close(
            value, want, msg=lambda m, o=output_name, i=input_name: f"d{o}/d{i}: {m}"
        )
    assert {k for k, _ in derived.partials} <= {o.name for o in spec.outputs}
    # Each subset of inputs needing a gradient computes exactly those, with the same values.
    for size in range(1, len(differentiable)):
        for subset in itertools.combinations(differentiable, size):
            grads = run_backward(derived, forward, seeds, set(subset))
            for item in spec.inputs:
                if item.name in subset and everything[item.name] is not None:
                    torch.testing.assert_close(grads[item.name], everything[item.name])
                else:
                    assert grads[item.name] is None
    # An output whose gradient is None (unused) contributes nothing.
    if len(spec.outputs) > 1:
        first = spec.outputs[0].name
        partial = run_backward(derived, forward, {**seeds, first: None}, set(differentiable))
        only_first = {k: (v if k == first else torch.zeros_like(v)) for k, v in seeds.items()}
        reference = reference_gradients(spec, inputs, only_first)
        for name in differentiable:
            value = partial[name]
            expected = expected_grads[name] - reference[name]
            if value is None:
                assert torch.count_nonzero(expected) == 0
            else:
                torch.testing.assert_close(value, expected)
    return derived


# --- Correctness --------------------------------------------------------------------

TWO_TENSORS = {"x": "tensor", "y": "tensor"}

CASES: dict[str, dict[str, Any]] = {
    "several outputs sharing a where value": {
        "inputs": TWO_TENSORS,
        "where": {"u": "x * y + sin(x)"},
        "outputs": {"a": "exp(u) * y", "b": "u**2 + log(1 + y**2)", "c": "tanh(x)"},
    },
    "where chain": {
        "inputs": TWO_TENSORS,
        "where": {
            "u1": "tanh(x)",
            "u2": "u1 * x + y",
            "u3": "sigmoid(u2) * u1",
            "u4": "softplus(u3 - u2) / (1 + u1**2)",
        },
        "outputs": {"z": "u4**3 + u2 * u3 + atan(u4)"},
    },
    "symbolic exponents": {
        "inputs": {"x": {"type": "tensor", "assume": "positive"}, "y": "tensor"},
        "outputs": {"z": "x**y + (1 + x)**(x * y) + 2**x + x**(1/3) + x**-2.5"},
    },
    "number exponent": {
        "inputs": {
            "x": {"type": "tensor", "assume": "positive"},
            "n": {"type": "int", "default": 3},
            "p": {"type": "float", "default": 1.7},
        },
        "outputs": {"z": "x**n * cos(x)**n + x**p + p**x"},
    },
    "input used in many places": {
        "inputs": TWO_TENSORS,
        "outputs": {
            "z": "x * sin(x) + exp(-x**2) * x + tanh(x * y) * x / (1 + x**2)"
            " + sigmoid(x) * softplus(x) * x + erf(x * y - x) + x**3 * y"
        },
    },
    "number intermediates": {
        "inputs": {"x": "tensor", "c": {"type": "float", "default": 0.4}},
        "where": {"k": "exp(c) + c**2", "w": "k * x"},
        "outputs": {"z": "sin(w) * k + c * x"},
    },
    "output renames a where value": {
        "inputs": {"z": "tensor"},
        "where": {"p": "sigmoid(z)"},
        "outputs": {"expected": "p", "variance": "p * (1 - p)", "same": "z"},
    },
    "constant factor and sum": {
        "inputs": TWO_TENSORS,
        "outputs": {"z": "3 * x + pi * y / 2 - e * x * y"},
    },
    "every smooth function": {
        "inputs": TWO_TENSORS,
        "where": {"s": "sigmoid(x)", "t": "tanh(y)"},
        "outputs": {
            "z": "exp(t) + log(2 + s) + log1p(s) + expm1(t) + sqrt(2 + t) + rsqrt(2 + t)"
            " + sin(x) + cos(y) + tan(t) + sinh(x) + cosh(y) + asin(s) + acos(t / 2)"
            " + atan(x) + asinh(y) + acosh(2 + s) + atanh(t / 2) + softplus(x * y)"
            " + log_sigmoid(x - y) + erf(x) + erfc(y)"
        },
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradients_match_sympy(case: str) -> None:
    check_gradients(make_spec(**CASES[case]), seed=len(case))


def _is_elementwise(path: Path) -> bool:
    """True for specs without reductions, gathers, views, scans, segments, contractions or
    dtype constants, whose overrides are derivatives: the ones sympy's elementwise check
    can evaluate.

    The others are checked against torch's built-ins (tests/test_builtins.py), their
    originals (tests/test_gather.py, test_views.py, test_gradient_overrides.py) and
    autograd by their generated tests.
    """
    specs = [v.spec for v in variants(symgrad.load_spec(path))]  # each option value's
    exprs = [
        e for s in specs for e in (*(i.expr for i in s.intermediates), *(o.expr for o in s.outputs))
    ]
    kinds = (
        reductions.Reduction,
        reductions.Normalization,
        indexing.Gather,
        views.View,
        views.Cat,
        scans.AlongDim,
        segments.SegmentSum,
        segments.IndexSelect,
        contractions.Einsum,
        dtypes.FinfoEps,  # a dtype's constant: sympy's check has no dtype
    )
    reads_grad = any(o.reads_grad for s in specs for o in s.overrides)
    return not reads_grad and not any(e.atoms(*kinds) for e in exprs)


ELEMENTWISE_EXAMPLES = [p for p in sorted(EXAMPLES.glob("*.yaml")) if _is_elementwise(p)]


@pytest.mark.slow  # every example through the whole pipeline
@pytest.mark.parametrize("path", ELEMENTWISE_EXAMPLES, ids=lambda p: p.stem)
def test_example_gradients_match_sympy(path: Path) -> None:
    for variant in variants(symgrad.load_spec(path)):  # the spec itself without options
        check_gradients(variant.spec)


def test_examples_exist() -> None:
    assert len(list(EXAMPLES.glob("*.yaml"))) >= 5


def test_check_gradients_catches_a_wrong_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself fails when a derivative rule is wrong (cos' = +sin)."""
    wrong = dataclasses.replace(
        functions.FUNCTIONS["cos"], derivative=lambda f, i: functions.call("sin", f.args[0])
    )
    monkeypatch.setitem(functions.FUNCTIONS, "cos", wrong)
    with pytest.raises(AssertionError):
        check_gradients(make_spec({"z": "cos(x) * x"}))


# --- What the backward saves ---------------------------------------------------------


def names(items: Iterable[sympy.Symbol | Input]) -> tuple[str, ...]:
    return tuple(i.name for i in items)


def all_statements(derived: Derived) -> list[Assignment]:
    statements = [s for b in derived.prelude for s in b.statements]
    for part in derived.backward:
        statements += [s for b in part.shared for s in b.statements]
        for gradient in part.gradients:
            statements += gradient.statements
    return statements


def backward_exprs(derived: Derived) -> list[sympy.Expr]:
    exprs = [s.expr for s in all_statements(derived)]
    exprs += [g.expr for part in derived.backward for g in part.gradients]
    return exprs


def test_exp_saves_its_output_not_its_input() -> None:
    derived = derive(make_spec({"y": "exp(x)"}))
    assert names(derived.saved_tensors) == ("y",)
    assert derived.saved_numbers == ()
    assert names(derived.saved_shapes) == ("x",)
    (gradient,) = derived.backward[0].gradients
    assert gradient.expr == sympy.Symbol("grad_y", real=True) * sympy.Symbol("y", real=True)
    assert not all_statements(derived)


def test_sin_saves_its_input() -> None:
    derived = derive(make_spec({"y": "sin(x)"}))
    assert names(derived.saved_tensors) == ("x",)
    (gradient,) = derived.backward[0].gradients
    x = derived.spec.inputs[0].symbol
    assert gradient.expr == sympy.Symbol("grad_y", real=True) * functions.call("cos", x)


@pytest.mark.parametrize(
    ("output", "saved"),
    [
        ("sigmoid(x)", ("y",)),
        ("tanh(x)", ("y",)),
        ("sqrt(x)", ("y",)),
        ("x**2", ("x",)),
        ("3 * x", ()),
        ("x + 1", ()),
    ],
)
def test_saved_tensors_by_rule(output: str, saved: tuple[str, ...]) -> None:
    derived = derive(make_spec({"y": output}))
    assert names(derived.saved_tensors) == saved
    # Without x saved, the backward still needs x's shape to reduce the gradient.
    assert names(derived.saved_shapes) == (() if "x" in saved else ("x",))


def test_logistic_moments_saves_only_the_mean() -> None:
    spec = make_spec(
        {"expected": "p", "variance": "p * (1 - p)"}, {"z": "tensor"}, {"p": "sigmoid(z)"}
    )
    derived = check_gradients(spec)
    assert names(derived.saved_tensors) == ("expected",)
    assert derived.saved_numbers == ()
    # Nothing is recomputed: the backward reads the saved mean instead of sigmoid(z).
    assert not any(
        e.has(functions.FUNCTIONS["sigmoid"].sympy_class) for e in backward_exprs(derived)
    )
    assert not any(e.has(spec.intermediates[0].symbol) for e in backward_exprs(derived))


def test_numbers_the_backward_reads_are_saved() -> None:
    spec = symgrad.load_spec(EXAMPLES / "soft_clamp.yaml")
    derived = check_gradients(spec)
    assert names(derived.saved_numbers) == ("lo", "hi")
    assert names(derived.saved_tensors) == ("x",)


@pytest.mark.parametrize(
    ("output", "numbers"),
    [
        ("exp(x) + c", ()),
        ("exp(x) * c", ()),  # the gradient is grad_y * y, the tangent y * tangent_x
        ("sin(x) * c", ("c",)),
        ("x**n", ("n",)),
        ("x**n + c", ("n",)),
        ("sin(c * x)", ("c",)),
        ("x * 2 + n", ()),
    ],
)
def test_saved_numbers(output: str, numbers: tuple[str, ...]) -> None:
    inputs = {
        "x": "tensor",
        "c": {"type": "float", "default": 0.5},
        "n": {"type": "int", "default": 3},
    }
    derived = check_gradients(make_spec({"y": output}, inputs))
    assert names(derived.saved_numbers) == numbers
    assert all(not i.is_tensor for i in derived.saved_numbers)


@pytest.mark.parametrize(
    ("output", "saved", "shapes"),
    [
        # tanh(x) is saved: eager autograd saves it, and m, x and 1 - m besides.
        ("m * x + (1 - m) * tanh(x)", ("x", "m", "tanh0"), ()),
        ("x * m", ("m",), ("x",)),
        ("tanh(x) + m", ("x",), ()),  # tanh(x) is recomputed, m is not read
        ("exp(x * m)", ("m", "y"), ("x",)),
        ("x * 2 + m**2", (), ("x",)),
    ],
)
def test_tensor_without_gradient(
    output: str, saved: tuple[str, ...], shapes: tuple[str, ...]
) -> None:
    inputs = {"x": "tensor", "m": {"type": "tensor", "requires_grad": False}}
    derived = check_gradients(make_spec({"y": output}, inputs))
    assert names(derived.saved_tensors) == saved
    assert names(derived.saved_shapes) == shapes
    for part in derived.backward:
        assert [g.input.name for g in part.gradients] == ["x"]


def test_masked_blend_example() -> None:
    derived = check_gradients(symgrad.load_spec(EXAMPLES / "masked_blend.yaml"))
    assert names(derived.saved_tensors) == ("x", "m", "tanh0")
    assert names(derived.saved_numbers) == ("strength",)
    assert [g.input.name for g in derived.backward[0].gradients] == ["x"]


def test_saved_values_fit_eager_memory_and_are_recomputed_for_double_backward() -> None:
    """Note [Saved values]: intermediates are saved only within what eager autograd saves,
    and the backward can recompute each from the inputs when grad mode is on."""
    for case in CASES.values():
        spec = make_spec(**case)
        derived = derive(spec)
        values = {o.symbol for o in derived.saved_values}
        allowed = {i.symbol for i in spec.tensor_inputs} | {o.symbol for o in derived.outputs}
        assert set(derived.saved_tensors) <= allowed
        assert values <= {a.target for a in derived.recompute}
        weigh = saving.Weights(spec, {a.target: a.expr for a in derived.forward})
        ours = sum(weigh(s) for s in derived.saved_tensors)
        assert ours <= max(saving.eager_saved_elements(spec), 0) or not values


@pytest.mark.parametrize(
    ("formula", "saved"),
    [
        ("sum(exp(x * t) ** 2)", ("x", "t", "exp0")),  # an exp: worth a tensor
        ("sum((x * t) ** 2)", ("x", "t")),  # one multiply: recomputed
    ],
)
def test_only_values_costly_to_recompute_are_saved(formula: str, saved: tuple[str, ...]) -> None:
    derived = derive(make_spec({"y": formula}, {"x": "tensor", "t": "tensor"}))
    assert names(derived.saved_tensors) == saved


@pytest.mark.parametrize(
    ("formula", "saved"),
    [
        ("x * sigmoid(beta * x)", ("x", "beta", "sigmoid0")),  # eager holds it; two passes
        ("x * sigmoid(x)", ("x",)),  # one pass: recomputed
    ],
)
def test_a_value_below_the_floor_is_saved_where_eager_holds_it_and_it_takes_two_passes(
    formula: str, saved: tuple[str, ...]
) -> None:
    """The committed table prices sigmoid(beta * x) under the floor (sigmoid is cheaper
    than a multiplication). Eager autograd holds it all the same, and recomputing it writes
    two fresh full-size temporaries: it is saved. sigmoid(x) alone is one pass."""
    inputs = {"x": {"type": "tensor", "shape": [4, 8]}, "beta": {"type": "tensor", "shape": [8]}}
    spec = make_spec({"y": formula}, inputs)
    beta, x = sympy.symbols("beta x")
    value = functions.call("sigmoid", beta * x)
    assert costs.table().expression(value) < saving.MIN_SAVED_COST
    assert saving.passes(value) == 2
    derived = check_gradients(spec)
    assert names(derived.saved_tensors) == saved


@pytest.mark.parametrize(
    ("expr", "count"),
    [("x", 0), ("1 - x", 1), ("2*x - 4", 2), ("-x", 1), ("x*y*z", 2), ("sin(x)**2", 2)],
)
def test_passes_counts_operations_as_printed(expr: str, count: int) -> None:
    assert saving.passes(sympy.sympify(expr)) == count


@pytest.mark.parametrize(
    ("formula", "elements"),
    [
        ("x * sigmoid(x)", 2 * 12),  # x and sigmoid(x)
        ("exp(x) + 1", 12),  # exp saves its result
        ("sin(x) * 2", 12),  # sin saves its argument; a number is not saved
        ("sum(x**2)", 12),  # x, for the square; a sum saves nothing
        ("where(x > 0, x**2, 0)", 12 + 3),  # x, and the condition as a bool mask
        ("clamp(round(x / 2), -1, 1)", 12),  # clamp's argument; round saves nothing
    ],
)
def test_eager_saved_elements(formula: str, elements: int) -> None:
    spec = make_spec({"y": formula}, {"x": {"type": "tensor", "shape": [3, 4]}})
    assert saving.eager_saved_elements(spec) == elements


@pytest.mark.parametrize(
    ("where", "output", "saved"),
    [
        # One difference saved spares both inputs; its gradient needs neither.
        ({"d": "x - t"}, "mean(where(abs(d) < 1, d**2, abs(d)))", ("d",)),
        # Huber's where is torch's huber_loss of d: one tensor saved where x and t are two.
        ({"d": "x - t"}, "mean(where(abs(d) < 1, 0.5 * d**2, abs(d) - 0.5))", ("d",)),
        ({"d": "x - 2 * t + 1"}, "sum(d**2)", ("d",)),
        # The backward still reads x: saving d as well would save more.
        ({"d": "x - t"}, "sum(d**2) + sum(x**3)", ("x", "t")),
        # Not affine: its own backward part would read x and t again.
        ({"p": "x * t"}, "sum(p**2)", ("x", "t")),
        # A where of inputs is no difference (found by tests/test_fuzz_autograd.py).
        ({"w": "where(x > 0.2, x, t)"}, "sum(exp(w))", ("x", "t")),
    ],
)
def test_a_difference_is_saved_instead_of_its_inputs(
    where: dict[str, str], output: str, saved: tuple[str, ...]
) -> None:
    spec = make_spec({"y": output}, {"x": "tensor", "t": "tensor"}, where)
    assert names(derive(spec).saved_tensors) == saved
    # The difference is a differentiable residual: double backward through it holds.
    module = symgrad.load_module(spec)
    x, t = (torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(module.case, (x, t))
    assert torch.autograd.gradgradcheck(module.case, (x, t))


# --- Guards -------------------------------------------------------------------------


def _reads(exprs: Iterable[sympy.Expr], statements: list[Assignment]) -> set[sympy.Basic]:
    """Every symbol that evaluating `exprs` reads, through `statements`."""
    defined = {s.target: s.expr for s in statements}
    seen: set[sympy.Basic] = set()
    frontier = set().union(*(e.free_symbols for e in exprs))
    while frontier:
        symbol = frontier.pop()
        if symbol in seen:
            continue
        seen.add(symbol)
        if symbol in defined:
            frontier |= defined[symbol].free_symbols
    return seen


def check_guards(derived: Derived) -> None:
    spec = derived.spec
    differentiable = set(spec.differentiable_inputs)
    order = {i: n for n, i in enumerate(spec.inputs)}
    statements = all_statements(derived)
    targets = [s.target for s in statements]
    assert len(targets) == len(set(targets)), "a temporary is assigned twice"
    # Who reads each statement, directly or through other statements.
    users: dict[sympy.Basic, set[Input]] = {t: set() for t in targets}
    outputs: dict[sympy.Basic, set[str]] = {t: set() for t in targets}
    for part in derived.backward:
        assert len({g.input for g in part.gradients}) == len(part.gradients)
        for gradient in part.gradients:
            assert gradient.input in differentiable, gradient.input.name
            read = _reads([gradient.expr, *(s.expr for s in gradient.statements)], statements)
            for symbol in read & users.keys():
                users[symbol].add(gradient.input)
                outputs[symbol].add(part.output.name)
            for statement in gradient.statements:
                assert users[statement.target] == {gradient.input}
    blocks: list[GuardedBlock] = list(derived.prelude)
    for part in derived.backward:
        blocks += part.shared
        for block in part.shared:
            for statement in block.statements:
                assert outputs[statement.target] == {part.output.name}
                assert len(users[statement.target]) > 1
    for block in blocks:
        assert block.inputs, "a block nobody needs"
        assert list(block.inputs) == sorted(block.inputs, key=order.__getitem__)
        for statement in block.statements:
            assert set(block.inputs) == users[statement.target], statement
    for block in derived.prelude:
        for statement in block.statements:
            assert len(outputs[statement.target]) > 1, statement


@pytest.mark.parametrize("case", sorted(CASES))
def test_guards(case: str) -> None:
    check_guards(derive(make_spec(**CASES[case])))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_example_guards(path: Path) -> None:
    check_guards(derive(symgrad.load_spec(path)))


def test_shared_work_is_guarded_by_its_users() -> None:
    spec = make_spec(
        {"z": "exp(x * y) * sin(x + y) + sin(x + y)**2 + cos(w)"},
        {"x": "tensor", "y": "tensor", "w": "tensor"},
    )
    derived = check_gradients(spec)
    check_guards(derived)
    (part,) = derived.backward
    blocks = [*derived.prelude, *part.shared]
    shared = [b for b in blocks if len(b.inputs) > 1]
    assert shared, "x and y share exp(x*y) and cos(x+y)"
    for block in shared:
        assert names(block.inputs) == ("x", "y")
    (w_gradient,) = [g for g in part.gradients if g.input.name == "w"]
    assert w_gradient.expr.free_symbols <= {part.grad, spec.inputs[2].symbol}


def test_no_gradient_for_inputs_an_output_does_not_use() -> None:
    spec = make_spec({"a": "sin(x)", "b": "y**2"}, TWO_TENSORS)
    derived = check_gradients(spec)
    check_guards(derived)
    a, b = derived.backward
    assert [g.input.name for g in a.gradients] == ["x"]
    assert [g.input.name for g in b.gradients] == ["y"]
    assert derived.prelude == ()


# --- Cost ---------------------------------------------------------------------------

_CHAIN_FUNCTIONS = ("sin", "cos", "tanh", "sigmoid", "exp", "atan", "softplus", "erf")


def random_formula(seed: int, steps: int) -> sympy.Expr:
    """A random chain of functions, products and sums over x and y, as a sympy tree."""
    rng = random.Random(seed)
    x, y = sympy.symbols("x y")

    def leaf() -> sympy.Expr:
        symbol = rng.choice([x, y])
        return symbol if rng.random() < 0.5 else symbol * rng.randint(2, 5) + rng.randint(1, 3)

    expr: sympy.Expr = x
    for _ in range(steps):
        choice = rng.random()
        if choice < 0.3:
            expr = functions.call(rng.choice(_CHAIN_FUNCTIONS), expr)
        elif choice < 0.55:
            expr = expr * leaf()
        elif choice < 0.8:
            expr = expr + leaf()
        else:
            expr = functions.call(rng.choice(_CHAIN_FUNCTIONS), expr * leaf())
    return expr


def ops(exprs: Iterable[sympy.Expr]) -> int:
    return sum(sympy.count_ops(e) for e in exprs)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "steps"), [(1, 60), (2, 120), (5, 160)])
def test_backward_is_a_constant_factor_of_the_forward(seed: int, steps: int) -> None:
    """Reverse mode: all gradients cost at most a few times the forward (op counts only:
    wall times belong in bench/, not in tests)."""
    formula = random_formula(seed, steps)
    assert 100 <= sympy.count_ops(formula) <= 300
    spec = make_spec({"z": formula}, TWO_TENSORS)
    derived = derive(spec)
    forward = ops(a.expr for a in derived.forward)
    backward = ops(backward_exprs(derived))
    assert backward <= 4 * forward + 20, (forward, backward)


def test_small_formula_gradients_are_correct() -> None:
    """The random formulas themselves differentiate correctly (a small one, checked fully)."""
    check_gradients(make_spec({"z": random_formula(3, 12)}, TWO_TENSORS), seed=3)


# --- Reductions -----------------------------------------------------------------------


def test_reductions_in_the_backward_are_saved_not_recomputed() -> None:
    """RMSNorm saves its [N, 1] reciprocal root r; the mean is not computed again."""
    derived = derive(symgrad.load_spec(EXAMPLES / "rms_norm.yaml"))
    assert [o.name for o in derived.residuals] == ["r"]
    assert "r" in names(derived.saved_tensors)
    backward = [s.expr for s in all_statements(derived)]
    backward += [g.expr for part in derived.backward for g in part.gradients]
    assert not any(e.atoms(reductions.ReduceMean) for e in backward)


def test_layer_norm_saves_one_full_size_tensor_and_its_statistic() -> None:
    """Recognised as layer_norm (Note [Layer norm]): the backward reads one full-size
    tensor and the per-row rstd, as many elements as eager's xc and rstd."""
    derived = derive(symgrad.load_spec(EXAMPLES / "layer_norm_affine.yaml"))
    assert names(derived.saved_tensors) == ("x", "w", "rstd")
    assert [o.name for o in derived.residuals] == ["rstd"]
    plain = derive(symgrad.load_spec(EXAMPLES / "layer_norm.yaml"))
    assert names(plain.saved_tensors) == ("y", "rstd")


def test_softmax_saves_only_its_output() -> None:
    derived = derive(symgrad.load_spec(EXAMPLES / "softmax.yaml"))
    assert names(derived.saved_tensors) == ("y",)
    assert derived.residuals == ()


@pytest.mark.parametrize(
    ("formula", "dims", "keepdim"),
    [
        ("sum(x)", None, False),
        ("mean(x, dim=-1, keepdim=True)", (-1,), True),
        ("sum(x, [0, 1])", (0, 1), False),
        ("logsumexp(x, 1, False)", (1,), False),
    ],
)
def test_reduction_calls_parse_with_torch_defaults(
    formula: str, dims: tuple[int, ...] | None, keepdim: bool
) -> None:
    spec = make_spec({"y": formula})
    (output,) = spec.outputs
    assert isinstance(output.expr, reductions.Reduction)
    assert (output.expr.dims, output.expr.keepdim) == (dims, keepdim)


def test_a_forward_quotient_comes_out_of_a_squared_reciprocal() -> None:
    """num * alpha**-2 holds num / alpha once: the backward reads the forward's value."""
    num, alpha, color, g = sympy.symbols("num alpha color g", real=True)
    values = {num / alpha: color}
    assert reuse.reuse_forward_values(g * num / alpha**2, values) == g * color / alpha
    assert reuse.reuse_forward_values(g * num / alpha**3, values) == g * color / alpha**2
    # A power of the other sign holds no 1/alpha.
    assert reuse.reuse_forward_values(g * num * alpha**2, values) == g * num * alpha**2


def test_a_forward_product_comes_out_of_larger_powers_under_any_of_its_factors() -> None:
    """s**6 / r**7 holds u6 = s**6 / r**6 (the screened Lennard-Jones backward): found
    under u6's factor r, which sorts first, as well as under s."""
    r, s, u6, g = sympy.symbols("r s u6 g", real=True)
    values = {s**6 / r**6: u6}
    assert reuse.reuse_forward_values(g * s**6 / r**7, values) == g * u6 / r
    assert reuse.reuse_forward_values(g * s**7 / r**6, values) == g * u6 * s
    # Too small a power of either factor holds no u6.
    assert reuse.reuse_forward_values(g * s**5 / r**6, values) == g * s**5 / r**6


def test_alpha_over_reads_its_color_through_the_renamed_alpha() -> None:
    """color's key is written with alpha, which the output alpha_out renames."""
    spec = symgrad.spec_from_dict(
        {
            "name": "Over",
            "inputs": {"a_s": "tensor", "a_d": "tensor", "c_s": "tensor", "c_d": "tensor"},
            "where": {"alpha": "a_s + a_d * (1 - a_s)"},
            "outputs": {
                "alpha_out": "alpha",
                "color": "(c_s * a_s + c_d * a_d * (1 - a_s)) / alpha",
            },
        }
    )
    backward = symgrad.generate(spec)["over.py"].split("def backward", 1)[1]
    assert "c_s - color" in backward
    assert "c_d - color" in backward
    assert "alpha_out**2" not in backward and "alpha_out ** 2" not in backward
