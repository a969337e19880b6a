"""Backends: the registry, `symgrad targets`, `--target` and `target:`, golden files per
backend, and a toy backend (tests/toy_backend/) added without touching anything else.

Golden files live in tests/golden/<backend>/; `python -m pytest --update-goldens`
rewrites them (and generated/) after an intended change.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path

import pytest

import symgrad
from symgrad.backends import registry
from symgrad.cli import main
from tests.conftest import REPO_ROOT, load_tool
from tests.toy_backend import BACKEND as TOY

GOLDEN = REPO_ROOT / "tests" / "golden"
# The specs each backend's golden files are made from, relative to the repository. The
# examples' Python output is generated/, compared by tests/test_generated.py; the other
# backends take two examples besides the corner cases of tests/specs/valid/.
VALID_SPECS = sorted(
    p.relative_to(REPO_ROOT) for p in (REPO_ROOT / "tests/specs/valid").glob("*.yaml")
)
GOLDEN_SPECS = {
    "cpp": VALID_SPECS,
    "python": VALID_SPECS,
    "toy": [*VALID_SPECS, Path("examples/soft_clamp.yaml"), Path("examples/rms_norm.yaml")],
}


@pytest.fixture
def toy() -> Iterator[None]:
    registry.register(TOY)
    yield
    registry.unregister(TOY.name)


def _generated(target: str) -> dict[str, str]:
    """What `symgrad gen SPECS -o tests/golden/TARGET --target TARGET` writes."""
    files: dict[str, str] = {}
    for path in GOLDEN_SPECS[target]:
        spec = symgrad.load_spec(path)
        files.update(symgrad.generate(spec, target, output=GOLDEN.relative_to(REPO_ROOT) / target))
    return files


@pytest.mark.parametrize("target", sorted(GOLDEN_SPECS))
def test_golden_files(
    target: str, toy: None, update_goldens: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)  # headers name specs relative to the working directory
    expected = _generated(target)
    folder = GOLDEN / target
    if update_goldens:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in {p.name for p in folder.iterdir()} - set(expected):
            (folder / stale).unlink()
        symgrad.write_files(expected, folder)
    actual = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    assert sorted(actual) == sorted(expected), f"tests/golden/{target}/ holds other files"
    for name, text in expected.items():
        if actual[name] != text:
            diff = "".join(
                difflib.unified_diff(actual[name].splitlines(True), text.splitlines(True))
            )
            pytest.fail(
                f"tests/golden/{target}/{name} is stale; run pytest --update-goldens\n{diff}"
            )


def test_targets_lists_the_backends(toy: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["cpp", "python", "toy"]


def test_targets_lists_the_built_in_backends_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["targets"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["cpp", "python"]
    assert registry.names() == ["cpp", "python"]


def test_gen_with_a_target_writes_that_backends_files(toy: None, tmp_path: Path) -> None:
    assert main(["gen", "examples/soft_clamp.yaml", "--target", "toy", "-o", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["soft_clamp.txt"]
    text = (tmp_path / "soft_clamp.txt").read_text()
    assert text.startswith("SoftClamp(x, lo, hi), from examples/soft_clamp.yaml")


def test_spec_target_selects_the_backend_and_the_option_overrides_it(toy: None) -> None:
    spec = symgrad.spec_from_dict(
        {"name": "Twice", "target": "toy", "inputs": {"x": "tensor"}, "outputs": {"y": "2 * x"}}
    )
    assert list(symgrad.generate(spec)) == ["twice.txt"]
    assert sorted(symgrad.generate(spec, "python")) == ["test_twice.py", "twice.py"]


def test_unknown_target_option_exits_2_and_names_the_targets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["gen", "examples/soft_clamp.yaml", "--target", "fortran"]) == 2
    assert capsys.readouterr().err == (
        "symgrad: error: unknown target 'fortran'; the targets are: cpp, python\n"
    )


def test_a_registered_name_cannot_be_taken_twice(toy: None) -> None:
    with pytest.raises(ValueError, match="registered already"):
        registry.register(symgrad.backends.base.Backend("toy", "another", TOY.render))
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("python")


def test_the_toy_backend_reads_only_the_ir_and_the_backend_types() -> None:
    """A backend needs no change outside its folder and the registry."""
    architecture = load_tool("architecture")
    toy = REPO_ROOT / "tests" / "toy_backend" / "__init__.py"
    assert architecture.imports(toy, set(architecture.modules())) == {
        "symgrad.ad.ir",
        "symgrad.backends.base",
    }
