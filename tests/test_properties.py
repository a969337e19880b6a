"""Property test: random formulas, generated end to end, match autograd.

Hypothesis draws formulas over two tensors x, y and a float c (with a default) from a
small grammar of smooth, bounded operations, written as expression strings. Each spec is
generated into a temporary directory, imported, and checked in float64 against autograd
of the same strings evaluated directly with torch (independently of symgrad's printer),
then with gradcheck and gradgradcheck. Set SYMGRAD_FUZZ_EXAMPLES to run more examples.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import symgrad
from symgrad.backends.python import kernels
from symgrad.frontend.model import Spec
from symgrad.language import functions
from tests.conftest import import_file

C_DEFAULT = 0.3
# Each case runs with c at its default and with c passed explicitly.
C_VALUES = (C_DEFAULT, -0.8)
# Largest |value| or |gradient| a case may reach at the test inputs.
MAX_MAGNITUDE = 1e3
# Coefficient of the x * y term added to the first output, so both tensors get a gradient.
TIE = 0.0123
SHAPE = (2, 3)

# Functions of one argument: each stays smooth and finite for any real argument.
UNARY = (
    "exp(tanh({}))",
    "sin({})",
    "cos({})",
    "tanh({})",
    "sigmoid({})",
    "softplus({})",
    "log_sigmoid({})",
    "log(1 + ({})**2)",
    "sqrt(1 + ({})**2)",
    "rsqrt(1 + ({})**2)",
    "atan({})",
    "erf({})",
    "-({})",
)
BINARY = (
    "({}) + ({})",
    "({}) - ({})",
    "({}) * ({})",
    "({}) / (1 + ({})**2)",
    "({}) / (2 + sin({}))",
    "({}) / sigmoid(tanh({}))",
)


# One formula using every function of the grammar on tensors, so that each rule is
# checked whatever hypothesis draws.
EVERY_FUNCTION = (
    " + ".join(
        f.format(a)
        for f, a in zip(UNARY, itertools.cycle(["x", "y", "x * y", "x - y", "0.5 * x + y"]))
    )
    + f" + {TIE} * x * y"
)


def _unary(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda f, a: f.format(a), st.sampled_from(UNARY), inner)


def _binary(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda f, a, b: f.format(a, b), st.sampled_from(BINARY), inner, inner)


def _power(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda k, a: f"({a})**{k}", st.sampled_from([2, 3]), inner)


def expressions(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    leaves = st.sampled_from([*names, "2", "0.5", "3"])
    return st.recursive(
        leaves, lambda inner: st.one_of(_unary(inner), _binary(inner), _power(inner)), max_leaves=7
    )


@dataclass(frozen=True)
class Case:
    """One random spec: an optional `where` value u and one or two outputs."""

    where: str | None
    outputs: tuple[str, ...]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    names = ("x", "y", "c")
    where = draw(st.none() | expressions(names))
    if where is not None:
        names += ("u",)
    outputs = draw(st.lists(expressions(names), min_size=1, max_size=2))
    # Both tensors get a gradient (no constant of the grammar can cancel this term);
    # inputs without one are covered by test_tensor_input_without_gradient.
    outputs[0] = f"{outputs[0]} + {TIE} * x * y"
    return Case(where, tuple(outputs))


def spec_dict(case: Case, name: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "inputs": {
            "x": "tensor",
            "y": "tensor",
            "c": {"type": "float", "default": C_DEFAULT},
        },
    }
    if case.where is not None:
        data["where"] = {"u": case.where}
    data["outputs"] = {f"out{k}": text for k, text in enumerate(case.outputs)}
    return data


def _on_tensors(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Any], Any]:
    return lambda a: function(torch.as_tensor(a, dtype=torch.float64))


# The language's functions as plain torch, for evaluating the strings independently.
TORCH_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "exp": _on_tensors(torch.exp),
    "sin": _on_tensors(torch.sin),
    "cos": _on_tensors(torch.cos),
    "tanh": _on_tensors(torch.tanh),
    "sigmoid": _on_tensors(torch.sigmoid),
    "softplus": _on_tensors(torch.nn.functional.softplus),
    "log_sigmoid": _on_tensors(torch.nn.functional.logsigmoid),
    "log": _on_tensors(torch.log),
    "sqrt": _on_tensors(torch.sqrt),
    "rsqrt": _on_tensors(torch.rsqrt),
    "atan": _on_tensors(torch.atan),
    "erf": _on_tensors(torch.erf),
    "sign": _on_tensors(torch.sign),
}


def plain_formula(case: Case, x: torch.Tensor, y: torch.Tensor, c: float) -> list[torch.Tensor]:
    """The outputs of `case` evaluated by Python and torch directly, for autograd."""
    namespace: dict[str, Any] = {"__builtins__": {}, **TORCH_FUNCTIONS, "x": x, "y": y, "c": c}

    def run(text: str) -> torch.Tensor:
        # Integer literals as floats, so that constant powers cannot make huge Python ints.
        value = eval(_INTEGER.sub(r"\1.0", text), namespace)
        return torch.as_tensor(value, dtype=torch.float64)

    if case.where is not None:
        namespace["u"] = run(case.where)
    return [run(text).expand(SHAPE) for text in case.outputs]


_INTEGER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
_counter = itertools.count()


def build_spec(case: Case) -> Spec | None:
    """The spec of `case`, or None when the drawn formula cancels to a constant (x - x)."""
    try:
        return symgrad.spec_from_dict(spec_dict(case, f"Fuzz{next(_counter)}"))
    except symgrad.SpecError as error:
        assert "does not depend on any tensor input" in str(error), error
        return None


def generate_module(spec: Spec, directory: Path) -> tuple[ModuleType, ModuleType]:
    """Generate, write and import the module of `spec` and its generated test."""
    files = symgrad.generate(spec)
    for filename, source in files.items():
        (directory / filename).write_text(source, encoding="utf-8")
    module = import_file(directory / f"{spec.module}.py", spec.module)
    test_module = import_file(directory / f"test_{spec.module}.py", f"test_{spec.module}")
    return module, test_module


def make_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 2 * torch.rand(SHAPE, generator=generator, dtype=torch.float64) - 1
    y = 2 * torch.rand(SHAPE, generator=generator, dtype=torch.float64) - 1
    return x.requires_grad_(), y.requires_grad_()


def _grads(outputs: list[torch.Tensor], cotangents: list[torch.Tensor], inputs: Any) -> list[Any]:
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    return [torch.zeros_like(i) if g is None else g for g, i in zip(grads, inputs, strict=True)]


def _cotangents(count: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(SHAPE, generator=generator, dtype=torch.float64) for _ in range(count)]


def is_moderate(case: Case) -> bool:
    """Values and gradients are finite and moderate, so gradcheck's differences are exact
    enough (an output of 3**12 + x * y / 100 would fail it through rounding alone)."""
    x, y = make_inputs()
    for c in C_VALUES:
        try:
            outputs = plain_formula(case, x, y, c)
        except OverflowError:  # a constant beyond float range
            return False
        grads = _grads(outputs, _cotangents(len(outputs)), (x, y))
        values = torch.stack([*outputs, *grads])
        if not torch.isfinite(values).all() or values.abs().max() > MAX_MAGNITUDE:
            return False
    return True


def check_case(case: Case, directory: Path, spec: Spec | None = None) -> None:
    """The generated Function agrees with autograd, passes gradcheck and gradgradcheck."""
    if spec is None:
        spec = build_spec(case)
        assert spec is not None and is_moderate(case)
    module, test_module = generate_module(spec, directory)
    function = getattr(module, spec.module)
    autograd_function = getattr(module, spec.name)
    x, y = make_inputs()
    for c in C_VALUES:
        actual = function(x, y) if c == C_DEFAULT else function(x, y, c)
        actual = list(actual) if isinstance(actual, tuple) else [actual]
        expected = plain_formula(case, x, y, c)
        assert len(actual) == len(expected)
        for value, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(value, want, msg=lambda m: f"value of {case}: {m}")
        cotangents = _cotangents(len(actual))
        actual_grads = _grads(actual, cotangents, (x, y))
        expected_grads = _grads(expected, cotangents, (x, y))
        for grad, want, name in zip(actual_grads, expected_grads, "xy", strict=True):
            torch.testing.assert_close(grad, want, msg=lambda m, n=name: f"d/d{n} of {case}: {m}")
        inputs = (x, y, c)
        assert torch.autograd.gradcheck(autograd_function.apply, inputs)
        assert torch.autograd.gradgradcheck(autograd_function.apply, inputs)
    # The generated test's own reference agrees with the independent evaluation.
    reference = test_module.reference(x, y, C_DEFAULT)
    for value, want in zip(reference, plain_formula(case, x, y, C_DEFAULT), strict=True):
        torch.testing.assert_close(value.expand(SHAPE), want)


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=int(os.environ.get("SYMGRAD_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
@example(case=Case(None, (EVERY_FUNCTION,)))
@example(case=Case("sigmoid(x) * y", ("u * (1 - u)", "u + log(1 + (x)**2)")))
@example(case=Case(None, ("(x) / sigmoid(tanh(c)) + y",)))
@example(case=Case(None, ("(log_sigmoid(c))**2 * x + y",)))
@example(case=Case(None, ("(x) / rsqrt(1 + (c)**2) + y",)))
def test_generated_function_matches_autograd(case: Case, directory: Path) -> None:
    spec = build_spec(case)
    assume(spec is not None and is_moderate(case))
    check_case(case, directory, spec)


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("sin", lambda f, i: -functions.call("cos", f.args[0])),
        ("atan", lambda f, i: 1 / (1 - f.args[0] ** 2)),
        ("exp", lambda f, i: 2 * f),
    ],
)
def test_detects_a_wrong_derivative_rule(
    name: str, wrong: Any, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property check fails when a rule of the function table is wrong."""
    broken = dataclasses.replace(functions.FUNCTIONS[name], derivative=wrong)
    monkeypatch.setitem(functions.FUNCTIONS, name, broken)
    with pytest.raises(AssertionError):
        check_case(Case(None, (f"{name}(x * y) + x",)), directory)


@pytest.mark.parametrize(
    ("name", "formula", "wrong"),
    [
        ("tanh", "tanh(x * y) + x", "torch.ops.aten.sigmoid_backward({grad}, {point})"),
        ("sigmoid", "sigmoid(x * y) + x", "torch.ops.aten.tanh_backward({grad}, {point})"),
        ("silu", "x * y * sigmoid(x * y) + x", "({grad} * {point})"),
    ],
)
def test_detects_a_wrong_backward_kernel(
    name: str, formula: str, wrong: str, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property check fails when the Python backend calls the wrong backward kernel."""
    kernel = dataclasses.replace(kernels.KERNELS[name], call=wrong)
    monkeypatch.setitem(kernels.KERNELS, name, kernel)
    with pytest.raises(AssertionError):
        check_case(Case(None, (formula,)), directory)


@pytest.mark.parametrize(
    "case",
    [
        Case(None, ("x * y", "x")),
        Case(None, ("x", "exp(x) * y")),
        Case("y", ("sin(x) * u", "u")),
    ],
    ids=str,
)
def test_output_that_is_an_input(case: Case, directory: Path) -> None:
    """An output equal to a (saved) input: the Function must still run and differentiate."""
    check_case(case, directory)


@pytest.mark.parametrize("output", ["sin(x)", "sign(y) + x", "exp(x) + 0 * y"])
def test_tensor_input_without_gradient(output: str, directory: Path) -> None:
    """A tensor input no output depends on (smoothly) gets a zero gradient, not a crash."""
    check_case(Case(None, (output,)), directory)


def test_integer_valued_intermediate_beyond_int64(directory: Path) -> None:
    """A `where` value that is a Python int must not overflow torch when it is used."""
    spec = symgrad.spec_from_dict(
        {
            "name": f"BigInt{next(_counter)}",
            "inputs": {"x": "tensor"},
            "where": {"k": "2**40"},
            "outputs": {"y": "x * k**2"},
        }
    )
    module, _ = generate_module(spec, directory)
    x = torch.tensor([1.0, -0.5], dtype=torch.float64, requires_grad=True)
    y = getattr(module, spec.module)(x)
    torch.testing.assert_close(y, x.detach() * 2.0**80)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, torch.full_like(x, 2.0**80))
