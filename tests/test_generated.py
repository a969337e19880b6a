"""The committed generated/ folder is exactly what symgrad writes for examples/.

generated/ doubles as the golden files: a change to the generator shows up here as a
diff. After an intended change, rewrite them with `python -m pytest --update-goldens`
(the same as `symgrad gen examples -o generated`) and review the diff.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import black
import pytest

import symgrad
from symgrad.backends.python.render import _BLACK_MODE

# pycodestyle, pyflakes, bugbear and pyupgrade: stricter than ruff's default rule set.
RUFF_RULES = "--select=E,F,W,B,UP"
EXAMPLES = sorted(Path("examples").glob("*.yaml"), key=str)


def _expected_files(repo_root: Path) -> dict[str, str]:
    """What `symgrad gen examples -o generated` writes, run from the repository root."""
    files: dict[str, str] = {}
    for spec_path in sorted((repo_root / "examples").glob("*.yaml")):
        spec = symgrad.load_spec(spec_path.relative_to(repo_root))
        files.update(symgrad.generate(spec, output="generated"))
    return files


def test_there_are_enough_examples(repo_root: Path) -> None:
    assert len(list((repo_root / "examples").glob("*.yaml"))) >= 8


def test_generated_folder_is_up_to_date(repo_root: Path, update_goldens: bool) -> None:
    expected = _expected_files(repo_root)
    folder = repo_root / "generated"
    if update_goldens:
        for stale in set(p.name for p in folder.glob("*.py")) - set(expected):
            (folder / stale).unlink()
        symgrad.write_files(expected, folder)
    actual = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.py")}
    assert sorted(actual) == sorted(expected), "generated/ holds other files than examples/ make"
    for name, text in expected.items():
        if actual[name] != text:
            diff = "".join(
                difflib.unified_diff(
                    actual[name].splitlines(True), text.splitlines(True), name, "expected"
                )
            )
            pytest.fail(f"generated/{name} is stale; run pytest --update-goldens\n{diff}")


def test_output_is_black_stable_and_free_of_absolute_paths(repo_root: Path) -> None:
    for name, text in _expected_files(repo_root).items():
        assert black.format_str(text, mode=_BLACK_MODE) == text, name
        assert str(repo_root) not in text, name
        assert "\\" not in text.splitlines()[0], name


def test_output_is_identical_under_any_hash_seed(repo_root: Path) -> None:
    """A fixed hash seed in a subprocess finds the committed files current, which another
    seed wrote; the golden test regenerates them under this process's random seed as well.

    `--check` compares what the command would write byte for byte, the headers' `-o
    generated` included, and writes nothing.
    """
    assert len(list((repo_root / "generated").glob("*.py"))) == len(_expected_files(repo_root))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    command = [sys.executable, "-m", "symgrad", "gen", "examples", "-o", "generated", "--check"]
    done = subprocess.run(command, env=env, cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_generated_code_passes_ruff(repo_root: Path) -> None:
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed next to this Python")
    command = [str(ruff), "check", "--no-cache", "--isolated", "--line-length=88", RUFF_RULES]
    result = subprocess.run([*command, "generated"], cwd=repo_root, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(("module", "name"), [("soft_clamp", "SoftClamp"), ("rms_norm", "RMSNorm")])
def test_readme_shows_the_code_symgrad_writes(repo_root: Path, module: str, name: str) -> None:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    start = readme.index(f"class {name}(torch.autograd.Function):")
    shown = readme[start : readme.index("```", start)].strip()
    source = (repo_root / "generated" / f"{module}.py").read_text(encoding="utf-8")
    assert shown == source[source.index(f"class {name}") :].strip()


def test_readme_shows_the_rms_norm_spec(repo_root: Path) -> None:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    spec = (repo_root / "examples" / "rms_norm.yaml").read_text(encoding="utf-8")
    body = spec[spec.index("name: RMSNorm") :].strip()
    assert f"```yaml\n{body}\n```" in readme
