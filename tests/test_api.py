"""The Python API: specs from dicts and sympy expressions, generation in memory."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import sympy
import torch

import symgrad
from symgrad.write import FileChange, unified_diff
from tests.conftest import import_file


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
    module = import_file(tmp_path / "sympy_given.py", "sympy_given_api_test")
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
    module = import_file(tmp_path / "soft_clamp.py", "soft_clamp_api_test")
    x = torch.linspace(-3, 3, 7, dtype=torch.float64)
    by_keyword = module.soft_clamp(x=x, hi=2.0)  # type: ignore[attr-defined]
    torch.testing.assert_close(by_keyword, 2.0 * torch.sigmoid(x))


def test_needs_input_grad_skips_unrequested_gradients(tmp_path: Path) -> None:
    spec = symgrad.load_spec(Path(__file__).parent.parent / "examples" / "swish.yaml")
    symgrad.write_files(symgrad.generate(spec), tmp_path)
    module = import_file(tmp_path / "swish.py", "swish_api_test")
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
    module = import_file(tmp_path / "polar.py", "polar_api_test")
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


# symgrad.load: a Function straight into the running process

EXAMPLES = Path(__file__).parent.parent / "examples"
SOFT_CLAMP = {
    "name": "SoftClamp",
    "doc": "Squash x smoothly into the interval (lo, hi).",
    "inputs": {
        "x": "tensor",
        "lo": {"type": "float", "default": 0.0},
        "hi": {"type": "float", "default": 1.0},
    },
    "where": {"s": "sigmoid(x)"},
    "outputs": {"y": "lo + (hi - lo) * s"},
}


@pytest.mark.parametrize(
    "given",
    [
        EXAMPLES / "soft_clamp.yaml",
        str(EXAMPLES / "soft_clamp.yaml"),
        SOFT_CLAMP,
        symgrad.spec_from_dict(SOFT_CLAMP),
    ],
    ids=["path", "str", "dict", "spec"],
)
def test_load_returns_a_working_function_class(given: symgrad.SpecLike) -> None:
    cls = symgrad.load(given)
    assert issubclass(cls, torch.autograd.Function) and cls.__name__ == "SoftClamp"
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    y = cls.apply(x, -1.0, 2.0)
    torch.testing.assert_close(y, -1.0 + 3.0 * torch.sigmoid(x))
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, 3.0 * torch.sigmoid(x) * (1 - torch.sigmoid(x)))
    function = sys.modules[cls.__module__].soft_clamp  # the convenience function, with defaults
    torch.testing.assert_close(function(x, hi=2.0), 2.0 * torch.sigmoid(x))


def test_load_registers_one_module_per_source() -> None:
    first = symgrad.load(EXAMPLES / "soft_clamp.yaml")
    assert symgrad.load(EXAMPLES / "soft_clamp.yaml") is first
    assert first.__module__.startswith("symgrad_generated_soft_clamp_")
    other = symgrad.load({**SOFT_CLAMP, "doc": "Another docstring."})
    assert other is not first and other.__module__ != first.__module__
    module = symgrad.load_module(EXAMPLES / "soft_clamp.yaml")
    assert module is sys.modules[first.__module__] and module.SoftClamp is first


def test_loaded_source_is_readable_in_tracebacks() -> None:
    cls = symgrad.load(EXAMPLES / "soft_clamp.yaml")
    assert "def backward(ctx" in inspect.getsource(cls)


# torch's own tracing of any autograd.Function warns so (torch 2.13), generated or not.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
def test_loaded_function_compiles_without_graph_breaks() -> None:
    cls = symgrad.load(EXAMPLES / "swish.yaml")
    swish = sys.modules[cls.__module__].swish
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    beta = torch.rand(6, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda a, b: swish(a, b) * 2, fullgraph=True, backend="aot_eager")
    result = compiled(x, beta)
    torch.testing.assert_close(result, 2 * x * torch.sigmoid(beta * x))
    grads = torch.autograd.grad(result.sum(), [x, beta])
    want = torch.autograd.grad((2 * x * torch.sigmoid(beta * x)).sum(), [x, beta])
    torch.testing.assert_close(grads, want)


def test_load_raises_spec_errors_with_their_location(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: Broken\ninputs:\n  x: tensor\noutputs:\n  y: sigmod(x)\n")
    with pytest.raises(symgrad.SpecError) as error_info:
        symgrad.load(spec)
    assert (error_info.value.location.line, error_info.value.location.column) == (5, 6)
    assert error_info.value.location.source.endswith("bad.yaml")
    with pytest.raises(symgrad.SpecError, match=r"^<dict>: outputs\.y: unknown function"):
        symgrad.load({**SOFT_CLAMP, "outputs": {"y": "sigmod(x)"}})


# Files on disk: what is stale, for build scripts


def test_stale_files_lists_missing_and_changed_files(tmp_path: Path) -> None:
    files = symgrad.generate(symgrad.load_spec(EXAMPLES / "soft_clamp.yaml"))
    assert symgrad.stale_files(files, tmp_path) == [tmp_path / name for name in files]
    symgrad.write_files(files, tmp_path)
    assert symgrad.stale_files(files, tmp_path) == []
    (tmp_path / "soft_clamp.py").write_text("# stale\n")
    assert symgrad.stale_files(files, tmp_path) == [tmp_path / "soft_clamp.py"]


def test_crlf_line_ends_count_as_current(tmp_path: Path) -> None:
    files = {"a.py": "x = 1\ny = 2\n"}
    (tmp_path / "a.py").write_bytes(b"x = 1\r\ny = 2\r\n")
    assert symgrad.stale_files(files, tmp_path) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, "a\nb\n", ["--- /dev/null", "+++ b/f.py", "@@ -0,0 +1,2 @@", "+a", "+b"]),
        ("a\nb\n", "a\nc\n", ["--- a/f.py", "+++ b/f.py", "@@ -1,2 +1,2 @@", " a", "-b", "+c"]),
        (
            "a\nb",
            "a\nb\n",
            [
                "--- a/f.py",
                "+++ b/f.py",
                "@@ -1,2 +1,2 @@",
                " a",
                "-b",
                "\\ No newline at end of file",
                "+b",
            ],
        ),
        (
            "a\u2028b\n",
            "a\u2028c\n",
            ["--- a/f.py", "+++ b/f.py", "@@ -1 +1 @@", "-a\u2028b", "+a\u2028c"],
        ),
    ],
    ids=["created", "changed", "missing-newline", "unicode-line-separator"],
)
def test_unified_diff(old: str | None, new: str, expected: list[str]) -> None:
    diff = unified_diff(FileChange(Path("out/f.py"), old, new), "f.py")
    assert diff.split("\n") == [*expected, ""]


# The hatch build hook of docs/build-integration


@pytest.mark.slow
def test_hatch_build_hook_example_generates_into_the_wheel(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    example = Path(__file__).parent.parent / "docs" / "build-integration"
    compile((example / "hatch_build.py").read_text(), "hatch_build.py", "exec")
    shutil.copy(example / "hatch_build.py", tmp_path / "hatch_build.py")
    (tmp_path / "specs").mkdir()
    shutil.copy(EXAMPLES / "soft_clamp.yaml", tmp_path / "specs" / "soft_clamp.yaml")
    (tmp_path / "src" / "demo").mkdir(parents=True)
    (tmp_path / "src" / "demo" / "__init__.py").write_text("")
    (tmp_path / ".gitignore").write_text("src/demo/generated/\n")  # the hook must still ship them
    (tmp_path / "pyproject.toml").write_text(HATCH_PROJECT)
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", "dist"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("demo-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        module = archive.read("demo/generated/soft_clamp.py").decode()
    assert "test_soft_clamp.py" in str(zipfile.ZipFile(wheel).namelist())
    assert module.startswith("# Generated by symgrad 0.1.0 from specs/soft_clamp.yaml.")


HATCH_PROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "demo"
version = "1.0"

[tool.hatch.build.targets.wheel]
packages = ["src/demo"]

[tool.hatch.build.hooks.custom]
specs = "specs"
output = "src/demo/generated"
"""
