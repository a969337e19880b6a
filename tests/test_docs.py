"""The tutorial runs as written: its Python blocks in one session, its shell block too."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT

TUTORIAL = REPO_ROOT / "docs" / "tutorial.md"
SHAPES_TUTORIAL = REPO_ROOT / "docs" / "tutorial-shapes.md"


def _blocks(language: str, path: Path = TUTORIAL) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


# torch.compile's own deprecation warnings on this torch release, not the tutorial's.
@pytest.mark.filterwarnings("ignore:.*should not be instantiated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script.*is deprecated:DeprecationWarning")
def test_tutorial_python_blocks_run_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "tutorial"}
    for block in _blocks("python"):
        exec(compile(block, str(TUTORIAL), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "torch.Size([4, 6]) torch.Size([6])" in printed
    assert "loss after 50 steps:" in printed and "symgrad:" in printed


def test_tutorial_shell_block_generates_and_tests_the_module(tmp_path: Path) -> None:
    namespace: dict[str, object] = {}
    exec(compile(_blocks("python")[0].split("Swish = ")[0], str(TUTORIAL), "exec"), namespace)
    # The swish.yaml the tutorial shows is the spec its notebook used.
    (shown,) = _blocks("yaml")
    assert yaml.safe_load(shown) == namespace["spec"]
    (tmp_path / "swish.yaml").write_text(shown, encoding="utf-8")
    (shell,) = _blocks("bash")
    for line in shell.strip().splitlines():
        words = line.split()
        assert words[0].startswith(".venv/bin/")  # the README's setup puts tools there
        program = words[0].removeprefix(".venv/bin/")
        command = [sys.executable, "-m", program, *words[1:]]
        if program == "python":
            command = [sys.executable, *words[1:]]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "my_functions" / "swish.py").is_file()
    assert (tmp_path / "my_functions" / "test_swish.py").is_file()


def test_shapes_tutorial_python_blocks_run_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "tutorial_shapes"}
    blocks = _blocks("python", SHAPES_TUTORIAL)
    assert len(blocks) == 10  # the helper, then one block per construct and the refusal
    for block in blocks:
        exec(compile(block, str(SHAPES_TUTORIAL), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "reduction must be one of 'none', 'sum', 'mean', got 'max'" in printed
    assert "outputs.y: chunk(): 2 chunks do not divide size 5 of dim 1" in printed
