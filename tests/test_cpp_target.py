"""The C++ target: generated/cpp/ is what it writes for examples/, every example generates,
the CLI writes its three files, and a missing tool is a clean error.

The generated tests themselves (build, gradcheck, gradgradcheck, opcheck, torch.compile)
run from generated/cpp/: a subset by default, every one with SYMGRAD_CPP_TESTS=all
(generated/cpp/conftest.py). `python -m pytest --update-goldens` rewrites generated/cpp/.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import symgrad
from symgrad.backends.cpp import render
from symgrad.cli import main
from symgrad.frontend.options import option_inputs
from tests.conftest import import_file

EXAMPLES = sorted(Path("examples").glob("*.yaml"), key=str)


@functools.cache
def _expected_files(repo_root: Path) -> dict[str, str]:
    """What the C++ target writes for examples/ (generated once per test session): what
    `symgrad gen examples -o generated/cpp --target cpp` writes."""
    files: dict[str, str] = {}
    for spec_path in sorted((repo_root / "examples").glob("*.yaml")):
        spec = symgrad.load_spec(spec_path.relative_to(repo_root))
        files.update(symgrad.generate(spec, "cpp", output="generated/cpp"))
    return files


def test_generated_cpp_folder_is_up_to_date(repo_root: Path, update_goldens: bool) -> None:
    expected = _expected_files(repo_root)
    folder = repo_root / "generated" / "cpp"
    made = {p.name for p in folder.iterdir() if p.name not in ("__init__.py", "conftest.py")}
    if update_goldens:
        for stale in made - set(expected):
            (folder / stale).unlink()
        symgrad.write_files(expected, folder)
        made = set(expected)
    assert sorted(made) == sorted(expected), "generated/cpp/ holds other files than examples/ make"
    for name, text in expected.items():
        actual = (folder / name).read_text(encoding="utf-8")
        if actual != text:
            diff = "".join(difflib.unified_diff(actual.splitlines(True), text.splitlines(True)))
            pytest.fail(f"generated/cpp/{name} is stale; run pytest --update-goldens\n{diff}")


def test_every_example_has_a_function_an_operator_and_a_test(repo_root: Path) -> None:
    files = _expected_files(repo_root)
    for spec_path in EXAMPLES:
        spec = symgrad.load_spec(repo_root / spec_path)
        module = spec.module
        if option_inputs(spec):  # a Function per variant, and a dispatcher (test_options)
            assert f"TORCH_LIBRARY(symgrad_{module}, m)" in files[f"{module}.cpp"]
            assert f"def {module}(" in files[f"{module}.py"]
            assert "def test_options_select_their_function" in files[f"test_{module}.py"]
            continue
        source = files[f"{module}.cpp"]
        assert f"TORCH_LIBRARY(symgrad_{module}, m)" in source
        assert "public torch::autograd::Function<" in source
        assert f"torch.ops.symgrad_{module}.{module}" in files[f"{module}.py"]
        assert "def test_opcheck" in files[f"test_{module}.py"]


def test_cpp_output_is_clang_format_stable(repo_root: Path) -> None:
    """What symgrad writes is already laid out: clang-format changes nothing."""
    for name, text in _expected_files(repo_root).items():
        if name.endswith(".cpp"):
            assert render.clang_format(text) == text, name
            assert str(repo_root) not in text, name


def test_the_loaders_and_tests_pass_ruff(repo_root: Path) -> None:
    # Next to this Python, as in test_generated: CI runs .venv/bin/python without the
    # venv on PATH, where shutil.which("ruff") found none and the test skipped.
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed next to this Python")
    command = [
        str(ruff),
        "check",
        "--no-cache",
        "--isolated",
        "--line-length=88",
        "--select=E,F,W,B,UP",
    ]
    result = subprocess.run(
        [*command, "generated/cpp"], cwd=repo_root, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gen_target_cpp_writes_three_files(tmp_path: Path, repo_root: Path) -> None:
    spec = repo_root / "examples" / "soft_clamp.yaml"
    assert main(["gen", str(spec), "--target", "cpp", "-o", str(tmp_path), "-q"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "soft_clamp.cpp",
        "soft_clamp.py",
        "test_soft_clamp.py",
    ]


def test_target_cpp_in_the_spec(tmp_path: Path, repo_root: Path) -> None:
    text = (repo_root / "examples" / "soft_clamp.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "soft_clamp.yaml"
    spec.write_text(text + "\ntarget: cpp\n", encoding="utf-8")
    assert main(["gen", str(spec), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert (tmp_path / "out" / "soft_clamp.cpp").is_file()


def test_a_missing_clang_format_is_a_clean_error(
    tmp_path: Path,
    repo_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def missing() -> str:
        raise render.ClangFormatMissingError("the cpp target formats with clang-format")

    monkeypatch.setattr(render, "_clang_format", missing)
    spec = repo_root / "examples" / "soft_clamp.yaml"
    status = main(["gen", str(spec), "--target", "cpp", "-o", str(tmp_path), "-q", "-j", "1"])
    assert status == 1
    error = capsys.readouterr().err
    assert "clang-format" in error and "Traceback" not in error
    assert "internal error" not in error  # a missing tool, not a bug to report
    assert not list(tmp_path.iterdir())


def test_the_api_says_a_missing_clang_format_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """symgrad.generate raises the backend's own error, not an InternalError (a SpecError
    that callers such as the bench would take for a refused spec)."""

    def missing() -> str:
        raise render.ClangFormatMissingError("the cpp target formats with clang-format")

    monkeypatch.setattr(render, "_clang_format", missing)
    spec = symgrad.spec_from_dict({"name": "F", "inputs": {"x": "tensor"}, "outputs": {"y": "x"}})
    with pytest.raises(render.ClangFormatMissingError):
        symgrad.generate(spec, "cpp")


def test_the_loader_builds_once_and_the_generated_test_passes(
    tmp_path: Path, repo_root: Path
) -> None:
    """A user's path end to end: generate, import (builds), test; import again (cached).

    The spec uses mish, whose CPU form runs in blocks past 2**18 elements: a large call
    checks the blocks and the remainder against torch's own mish.
    """
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler")
    ninja = pytest.importorskip("ninja")
    spec = tmp_path / "scaled_mish.yaml"
    spec.write_text(
        "name: ScaledMish\ninputs:\n  x: tensor\n  k: {type: float, default: 2.0}\n"
        "outputs:\n  y: k * mish(x)\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert main(["gen", str(spec), "--target", "cpp", "-o", str(out), "-q"]) == 0
    env = {**os.environ, "SYMGRAD_CPP_CACHE": str(tmp_path / "cache")}
    # Not activated: the ninja package's folder is not on PATH; the loader finds it.
    paths = env["PATH"].split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in paths if Path(p) != Path(ninja.BIN_DIR))
    test = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"]
    first = subprocess.run(
        [*test, str(out / "test_scaled_mish.py")], cwd=out, env=env, capture_output=True, text=True
    )
    assert first.returncode == 0, first.stdout + first.stderr
    (built,) = (tmp_path / "cache").iterdir()
    library = next(built.glob("*.so"))
    stamp = library.stat().st_mtime_ns
    again = subprocess.run(
        [sys.executable, "-c", _LARGE_CALL], cwd=out, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert library.stat().st_mtime_ns == stamp, "an unchanged source was rebuilt"


# 2**19 + 7 elements: two full blocks at up to 2 threads, and a remainder.
_LARGE_CALL = """
import torch
from scaled_mish import scaled_mish

x = (torch.randn(2**19 + 7, dtype=torch.float64) * 10).requires_grad_()
g = torch.randn_like(x)
y = scaled_mish(x, 3.0)
(grad,) = torch.autograd.grad(y, x, g)
want = 3.0 * torch.nn.functional.mish(x)
(want_grad,) = torch.autograd.grad(want, x, g)
torch.testing.assert_close(y, want)
torch.testing.assert_close(grad, want_grad)
"""


def test_a_doc_ending_in_a_backslash_does_not_comment_out_code() -> None:
    spec = symgrad.spec_from_dict(
        {
            "name": "Twice",
            "doc": "Ends in a backslash \\",
            "inputs": {"x": "tensor"},
            "outputs": {"y": "2 * x"},
        }
    )
    source = symgrad.generate(spec, "cpp")["twice.cpp"]
    assert all(not line.rstrip().endswith("\\") for line in source.splitlines())


def test_the_loader_refuses_an_operator_another_version_of_its_source_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process cannot hold two builds of one operator; the second loader says so rather
    than run the first one's code. An operator registered otherwise (an ahead-of-time
    build, this very source) is used as it is. No compiler: the operator is registered
    from Python, and the other build is only a path among torch's loaded libraries."""
    spec = symgrad.spec_from_dict(
        {"name": "LoaderProbe", "inputs": {"x": "tensor"}, "outputs": {"y": "2 * x"}}
    )
    symgrad.write_files(symgrad.generate(spec, "cpp"), tmp_path)
    library = torch.library.Library("symgrad_loader_probe", "DEF")
    library.define("loader_probe(Tensor x) -> Tensor")
    library.impl("loader_probe", lambda x: 2 * x, "CompositeExplicitAutograd")
    monkeypatch.setenv("SYMGRAD_CPP_CACHE", str(tmp_path / "cache"))
    other = tmp_path / "cache" / "loader_probe_0123456789abcdef" / "symgrad_loader_probe.so"
    neighbour = tmp_path / "cache" / "loader_probe_twice_0123456789abcdef" / "x.so"
    monkeypatch.setattr(torch.ops, "loaded_libraries", {str(neighbour)})
    module = import_file(tmp_path / "loader_probe.py", "loader_probe_first")
    assert torch.equal(module.loader_probe(torch.ones(2)), torch.full((2,), 2.0))
    monkeypatch.setattr(torch.ops, "loaded_libraries", {str(other), str(neighbour)})
    with pytest.raises(ImportError, match=r"another version of loader_probe\.cpp"):
        import_file(tmp_path / "loader_probe.py", "loader_probe_second")


def test_a_reduction_over_dim_minus_one_of_0d_inputs_builds_and_matches_autograd(
    tmp_path: Path,
) -> None:
    """Over dim -1, a 0-d input loses no dim: the backward unsqueezes its gradient only
    at rank >= 1 (Note [Reductions of 0-d tensors]), and the shape helpers take rank 0."""
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler")
    pytest.importorskip("ninja")
    spec = symgrad.spec_from_dict(
        {
            "name": "CosineLast",
            "inputs": {"a": "tensor", "b": "tensor"},
            "outputs": {"y": "sum(a * b, dim=-1) / sqrt(sum(a**2, dim=-1)) + logsumexp(a, dim=-1)"},
        }
    )
    out = tmp_path / "out"
    out.mkdir()
    for name, text in symgrad.generate(spec, "cpp").items():
        (out / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "SYMGRAD_CPP_CACHE": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", _ZERO_D_CALL], cwd=out, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


_ZERO_D_CALL = """
import torch
from cosine_last import cosine_last

for shape in [(), (3,), (2, 3)]:
    a, b = (torch.rand(shape, dtype=torch.float64).add(0.5).requires_grad_() for _ in "ab")
    y = cosine_last(a, b)
    want = (a * b).sum(-1) / (a**2).sum(-1).sqrt() + torch.logsumexp(a, -1)
    g = torch.randn_like(want)
    torch.testing.assert_close(y, want)
    mine, theirs = torch.autograd.grad(y, (a, b), g), torch.autograd.grad(want, (a, b), g)
    for got, expected in zip(mine, theirs):
        assert got.shape == expected.shape, (shape, got.shape)
        torch.testing.assert_close(got, expected)
    assert torch.autograd.gradgradcheck(cosine_last, (a, b))
"""
