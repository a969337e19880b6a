"""The Python API: specs from dicts and sympy expressions, generation in memory."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import sympy
import torch

import symgrad


def _import(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_spec_from_dict_accepts_sympy_expressions(tmp_path: Path) -> None:
    x, k = sympy.symbols("x k")
    spec = symgrad.spec_from_dict(
        {
            "name": "SympyGiven",
            "inputs": {"x": "tensor", "k": {"type": "float", "default": 2.0}},
            "outputs": {"y": sympy.exp(-k * x**2) + sympy.Abs(x)},
        }
    )
    files = symgrad.generate(spec)
    assert sorted(files) == ["sympy_given.py", "test_sympy_given.py"]
    symgrad.write_files(files, tmp_path)
    module = _import(tmp_path / "sympy_given.py", "sympy_given_api_test")
    value = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    result = module.sympy_given(value)  # type: ignore[attr-defined]
    expected = torch.exp(-2.0 * value**2) + value.abs()
    torch.testing.assert_close(result, expected)
    (grad,) = torch.autograd.grad(result.sum(), value)
    (want,) = torch.autograd.grad(expected.sum(), value)
    torch.testing.assert_close(grad, want)


def test_alias_function_fills_defaults_and_takes_keywords(tmp_path: Path) -> None:
    spec = symgrad.load_spec(Path(__file__).parent.parent / "examples" / "soft_clamp.yaml")
    symgrad.write_files(symgrad.generate(spec), tmp_path)
    module = _import(tmp_path / "soft_clamp.py", "soft_clamp_api_test")
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    by_keyword = module.soft_clamp(x=x, hi=2.0)  # type: ignore[attr-defined]
    torch.testing.assert_close(by_keyword, 2.0 * torch.sigmoid(x))


def test_needs_input_grad_skips_unrequested_gradients(tmp_path: Path) -> None:
    spec = symgrad.load_spec(Path(__file__).parent.parent / "examples" / "swish.yaml")
    symgrad.write_files(symgrad.generate(spec), tmp_path)
    module = _import(tmp_path / "swish.py", "swish_api_test")
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    beta = torch.rand(6, dtype=torch.float64)  # no gradient wanted
    out = module.swish(x, beta)  # type: ignore[attr-defined]
    calls = []
    original = torch.Tensor.sum_to_size

    def spy(self: torch.Tensor, *size: object) -> torch.Tensor:
        calls.append(size)
        return original(self, *size)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.Tensor, "sum_to_size", spy)
        (grad_x,) = torch.autograd.grad(out.sum(), [x])
    assert grad_x.shape == x.shape
    assert calls == []  # beta's gradient (the only one needing a reduction) was never built


def test_several_outputs_accept_missing_gradients(tmp_path: Path) -> None:
    spec = symgrad.load_spec(Path(__file__).parent.parent / "examples" / "polar.yaml")
    symgrad.write_files(symgrad.generate(spec), tmp_path)
    module = _import(tmp_path / "polar.py", "polar_api_test")
    x = torch.rand(3, dtype=torch.float64) + 0.5
    y = torch.randn(3, dtype=torch.float64)
    x.requires_grad_()
    radius, _angle = module.polar(x, y)  # type: ignore[attr-defined]
    (grad,) = torch.autograd.grad(radius.sum(), [x])  # angle's gradient arrives as None
    torch.testing.assert_close(grad, x.detach() / torch.sqrt(x.detach() ** 2 + y**2))


def test_spec_error_carries_its_location() -> None:
    with pytest.raises(symgrad.SpecError) as error_info:
        symgrad.spec_from_dict({"name": "Bad", "inputs": {"x": "tensor"}, "outputs": {"y": "x +"}})
    assert error_info.value.location.source == "<dict>"
    assert "invalid expression" in error_info.value.message
