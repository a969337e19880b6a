"""A wheel carries the templates, and an installed symgrad finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


def test_wheel_ships_templates_and_works_when_installed(repo_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
        check=True,
        cwd=repo_root,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("symgrad-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    assert "symgrad/templates/python/function.py.jinja" in names
    assert "symgrad/templates/python/test_function.py.jinja" in names
    assert "symgrad/ad/costs.json" in names  # the cost table generation reads
    # Run the unpacked wheel (first on PYTHONPATH) from elsewhere: it must find its own
    # templates, not the checkout's.
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(repo_root / "examples" / "mish.yaml")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "site" / "symgrad" / "templates" / "python")


_SCRIPT = """
import sys
import symgrad, symgrad.backends.python.render
files = symgrad.generate(symgrad.load_spec(sys.argv[1]))
assert "class Mish(torch.autograd.Function)" in files["mish.py"]
print(symgrad.backends.python.render.templates_directory())
"""
