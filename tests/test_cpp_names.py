"""The C++ target's names are its own, whatever the spec's name (Note [Generated names] in
symgrad.backends.cpp.names).

A spec named as an ATen function (LogSigmoid: its kernel `log_sigmoid_forward` meets
`at::log_sigmoid_forward` by argument-dependent lookup) or as one of the template's
helpers (FusedFrame, cpu_form_applies) must build and run. CI checks that every call is
qualified and compiles LogSigmoid's file (syntax only, about 10 s); the C++ slow mode
(`SYMGRAD_CPP_TESTS=all`) builds every spec below in one library and checks each, through
its generated loader, against the Python target.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.utils.cpp_extension

import symgrad
from tests.conftest import CPP_SLOW_MODE

_X = {"x": "tensor"}

# Specs named as ATen functions, as ATen's `_forward` and `_backward` functions, and as
# the template's helpers; plain, with reductions, with CPU forms, fused and in place.
SPECS: list[dict[str, Any]] = [
    {"name": "LogSigmoid", "inputs": _X, "outputs": {"y": "-softplus(-x)"}},
    {"name": "Softplus", "mode": "fused", "inputs": _X, "outputs": {"y": "softplus(x)"}},
    {"name": "Silu", "mode": "fused", "inputs": _X, "outputs": {"y": "x * sigmoid(x)"}},
    {"name": "Mish", "inputs": _X, "outputs": {"y": "mish(x)"}},
    {"name": "Gelu", "inputs": _X, "outputs": {"y": "gelu(x)"}},
    {
        "name": "Hardtanh",
        "inputs": {
            "x": "tensor",
            "min_val": {"type": "float", "default": -1.0},
            "max_val": {"type": "float", "default": 1.0},
        },
        "outputs": {"y": "clamp(x, min_val, max_val)"},
    },
    {
        "name": "LayerNorm",
        "inputs": {"x": "tensor", "eps": {"type": "float", "default": 1e-5}},
        "where": {"c": "x - mean(x, dim=-1, keepdim=True)"},
        "outputs": {"y": "c / sqrt(mean(c**2, dim=-1, keepdim=True) + eps)"},
    },
    {"name": "Elu", "inputs": _X, "outputs": {"y": "where(x > 0, x, exp(x) - 1)"}},
    {"name": "Relu", "inputs": _X, "outputs": {"y": "relu(x)"}},
    {"name": "Sigmoid", "inputs": _X, "outputs": {"y": "sigmoid(x)"}},
    {"name": "Tanh", "inputs": _X, "outputs": {"y": "tanh(x)"}},
    {
        "name": "SoftplusBackward",
        "inputs": {"grad_output": "tensor", "x": "tensor"},
        "outputs": {"y": "grad_output * sigmoid(x)"},
    },
    {
        "name": "Threshold",
        "inputs": {
            "x": "tensor",
            "threshold": {"type": "float", "default": 0.1},
            "value": {"type": "float", "default": -2.0},
        },
        "outputs": {"y": "where(x > threshold, x, value)"},
    },
    {
        "name": "Add",
        "inputs": {"x": "tensor", "other": "tensor"},
        "outputs": {"y": "x + other", "z": "x * sum(other)"},
    },
    {"name": "FusedFrame", "mode": "fused", "inputs": _X, "outputs": {"y": "x * tanh(x)"}},
    {"name": "VecExp", "mode": "fused", "inputs": _X, "outputs": {"y": "exp(x)"}},
    {"name": "AutogradContext", "inputs": _X, "outputs": {"y": "2 * x"}},
    {"name": "CpuFormApplies", "inputs": _X, "outputs": {"y": "mish(x)"}},
    {
        "name": "ReducedDims",
        "inputs": _X,
        "outputs": {"y": "x - mean(x, dim=-1, keepdim=True)"},
    },
    {"name": "Detail", "inplace": True, "inputs": _X, "outputs": {"y": "3 * x"}},
]

# The functions a file defines at namespace scope (the helpers' namespace aside).
_DEFINED = re.compile(r"^inline [^(]*?\b(\w+)\(", re.M)
_HELPERS = re.compile(r"^namespace (\w+) \{$.*?^\}  // namespace \1$", re.M | re.S)


def _source(name: str) -> str:
    """The generated C++ of the spec named `name` in SPECS."""
    (spec,) = (symgrad.spec_from_dict(data) for data in SPECS if data["name"] == name)
    return symgrad.generate(spec, "cpp")[f"{spec.module}.cpp"]


def _code(source: str) -> str:
    """`source` without its comments, strings and the helpers' namespace."""
    code = _HELPERS.sub("", source.replace(f"namespace {_namespace(source)} {{", "", 1))
    return re.sub(r'//[^\n]*|"[^"\n]*"', "", code)


def _namespace(source: str) -> str:
    found = re.search(r"^namespace (symgrad_\w+) \{$", source, re.M)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("data", SPECS, ids=[d["name"] for d in SPECS])
def test_every_call_of_a_function_the_file_defines_is_qualified(data: dict[str, Any]) -> None:
    """An unqualified call would also find ATen's function of that name (by the at::Tensor
    argument) or a spec's: `log_sigmoid_forward(x)` was ambiguous."""
    spec = symgrad.spec_from_dict(data)
    source = symgrad.generate(spec, "cpp")[f"{spec.module}.cpp"]
    code = _code(source)
    defined = set(_DEFINED.findall(code))
    assert spec.module in defined
    for name in defined:
        for use in re.finditer(rf"(?<![\w:])&?{name}\b(?=\()|&{name}\b", code):
            line = code[code.rfind("\n", 0, use.start()) + 1 : code.find("\n", use.end())]
            assert line.startswith("inline "), f"unqualified {name} in {spec.module}: {line}"


def test_the_helpers_namespace_is_not_the_modules_name() -> None:
    """A namespace cannot share its name with a function: a module named `detail` (and
    its in-place `detail_`) moves the helpers' namespace aside."""
    source = _source("Detail")
    assert "namespace detail__ {" in source
    assert "detail__::reduce_to(" in source
    assert "inline at::Tensor detail_(" in source


@pytest.mark.slow
def test_log_sigmoid_compiles() -> None:
    """The issue's spec, compiled (syntax only: no object code, no link)."""
    compiler = shutil.which(os.environ.get("CXX", "c++"))
    if compiler is None:
        pytest.skip("no C++ compiler")
    includes = [f"-I{path}" for path in torch.utils.cpp_extension.include_paths()]
    result = subprocess.run(
        [compiler, "-std=c++20", "-fsyntax-only", "-x", "c++", *includes, "-"],
        input=_source("LogSigmoid"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-4000:]


def _in_slow_mode(test: Any) -> Any:
    """`test` marked to run in the C++ slow mode only, where a compiler is present."""
    for mark in reversed(CPP_SLOW_MODE):
        test = mark(test)
    return test


@_in_slow_mode
def test_specs_named_as_aten_or_a_helper_build_and_run_as_the_python_target(
    tmp_path: Path,
) -> None:
    """Every spec above, built as one library (LibTorch's headers parsed once), then
    called through its generated loader (which finds its operator registered): the
    forward, below autograd too, the gradients of every input and the in-place variant
    equal the Python target's, in float64. In a process of its own: some modules
    (mish, layer_norm) are examples' too, whose operators the suite may load."""
    for data in SPECS:
        spec = symgrad.spec_from_dict(data)
        symgrad.write_files(symgrad.generate(spec, "cpp"), tmp_path)
        text = symgrad.generate(spec, "python")[f"{spec.module}.py"]
        (tmp_path / f"python_{spec.module}.py").write_text(text, encoding="utf-8")
    specs = [symgrad.spec_from_dict(data) for data in SPECS]
    modules = [spec.module for spec in specs]
    arguments = [f"{spec.module}:{len(spec.tensor_inputs)}" for spec in specs]
    result = subprocess.run(
        [sys.executable, "-c", _CHECK, *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    assert result.stdout.split() == modules


# Run in the folder of the generated files; its arguments: `module:tensor_inputs`.
_CHECK = """
import hashlib, importlib, os, sys
from pathlib import Path

import torch
import torch.utils.cpp_extension

modules = dict(argument.split(":") for argument in sys.argv[1:])
sources = [Path(f"{module}.cpp").resolve() for module in modules]
bundle = "".join(f'#include "{source}"\\n' for source in sources)
key = hashlib.sha256(torch.__version__.encode())
for source in sources:
    key.update(source.read_bytes())
digest = key.hexdigest()[:16]
root = os.environ.get("SYMGRAD_CPP_CACHE") or Path.home() / ".cache" / "symgrad" / "cpp"
directory = Path(root) / f"aten_names_{digest}"
directory.mkdir(parents=True, exist_ok=True)
(directory / "aten_names.cpp").write_text(bundle)
torch.utils.cpp_extension.load(
    name=f"symgrad_aten_names_{digest}",
    sources=[str(directory / "aten_names.cpp")],
    build_directory=str(directory),
    is_python_module=False,
)
sys.path.insert(0, ".")


def as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


for module, count in modules.items():
    cpp = getattr(importlib.import_module(module), module)
    python = getattr(importlib.import_module(f"python_{module}"), module)
    torch.manual_seed(0)
    inputs = [torch.randn(4, 6, dtype=torch.float64, requires_grad=True) for _ in range(int(count))]
    got, want = as_tuple(cpp(*inputs)), as_tuple(python(*inputs))
    seeds = [torch.randn_like(w) for w in want]
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(
        torch.autograd.grad(got, inputs, seeds), torch.autograd.grad(want, inputs, seeds)
    )
    with torch.no_grad():  # the kernel below autograd, and the fused loops' forward
        torch.testing.assert_close(as_tuple(cpp(*inputs)), want)
    in_place = getattr(importlib.import_module(module), f"{module}_", None)
    if in_place is not None:
        overwritten = inputs[0].detach().clone()
        in_place(overwritten, *inputs[1:])
        torch.testing.assert_close(overwritten, want[0])
    print(module)
"""
