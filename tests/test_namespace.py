"""The generator owns its namespace: every name its templates use works as a spec name.

The names are read from generated sources (eager, fused, custom_op, several outputs,
reductions, number inputs); each is then declared as a spec input, and the module must
import, run forward and backward, and give the gradient of the plain formula.
"""

from __future__ import annotations

import ast
import builtins
import keyword
from typing import Any

import pytest
import torch

import symgrad
from symgrad.frontend.names import RESERVED_NAMES
from symgrad.language.names import is_function_name

SPECS: list[dict[str, Any]] = [
    {
        "name": "Eager",
        "inputs": {"x": "tensor", "w": {"type": "tensor", "shape": [4]}, "k": "float"},
        "where": {"m": "mean(x * w, dim=-1, keepdim=True)"},
        "outputs": {"y": "sin(x) * m + k", "z": {"expr": "x * 2", "differentiable": False}},
    },
    {
        "name": "Operator",
        "custom_op": True,
        "inputs": {"x": "tensor"},
        "outputs": {"y": "x / sqrt(sum(x**2, dim=-1, keepdim=True) + 1)", "z": "tanh(x)"},
    },
    {"name": "Fused", "mode": "fused", "inputs": {"x": "tensor"}, "outputs": {"y": "exp(x)"}},
]


def _names_in(source: str) -> set[str]:
    """Every identifier the generated source binds or reads."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _template_names() -> dict[str, str]:
    """Names of the generated code that a spec may declare, by the mode that uses them."""
    found: dict[str, str] = {}
    for data in SPECS:
        spec = symgrad.spec_from_dict(data)
        declared = {i.name for i in spec.inputs} | {o.name for o in spec.outputs}
        declared |= {i.name for i in spec.intermediates} | {spec.name, spec.module}
        for file in symgrad.generate(spec).values():
            for name in _names_in(file) - declared:
                found.setdefault(name, data.get("mode", "eager"))
    return {
        name: mode
        for name, mode in sorted(found.items())
        if name.isidentifier()
        and not keyword.iskeyword(name)
        and name not in RESERVED_NAMES
        and not hasattr(builtins, name)
        and not is_function_name(name)
        and not name.startswith("_t")
    }


NAMES = _template_names()


def test_the_templates_names_are_found() -> None:
    assert {"function", "body", "inputs", "output", "grad_y"} <= NAMES.keys()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_spec_may_use_every_name_of_the_generated_code(name: str) -> None:
    mode = "fused" if NAMES[name] == "fused" and name not in _eager_names() else "eager"
    other = "v" if name != "v" else "u"
    spec = symgrad.spec_from_dict(
        {
            "name": "Clash",
            "mode": mode,
            "inputs": {name: "tensor", other: "tensor"},
            "outputs": {"out": f"mean({name} * {other}, dim=-1, keepdim=True) + sin({name})"},
        }
    )
    clash = symgrad.load_module(spec).clash
    a, b = (torch.rand(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    got = torch.autograd.grad(clash(a, b).sum(), (a, b))
    plain = (a * b).mean(-1, keepdim=True) + torch.sin(a)
    want = torch.autograd.grad(plain.sum(), (a, b))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _eager_names() -> set[str]:
    return {name for name, mode in NAMES.items() if mode == "eager"}
