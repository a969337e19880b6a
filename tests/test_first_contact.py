"""A new user's first commands: gen --test writes and tests a Function, show --plot draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from symgrad.api import spec_from_dict
from symgrad.frontend.names import snake_case
from tests.conftest import REPO_ROOT

SYMGRAD = [sys.executable, "-m", "symgrad"]


def test_gen_with_test_writes_the_function_and_passes_its_test(tmp_path: Path) -> None:
    spec = REPO_ROOT / "examples" / "soft_clamp.yaml"
    command = [*SYMGRAD, "gen", str(spec), "-o", "my_functions", "--test"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote my_functions/soft_clamp.py" in done.stdout
    assert "wrote my_functions/test_soft_clamp.py" in done.stdout
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_gen_with_test_fails_when_the_generated_test_fails(tmp_path: Path) -> None:
    spec = REPO_ROOT / "examples" / "soft_clamp.yaml"
    subprocess.run([*SYMGRAD, "gen", str(spec), "-o", "out"], cwd=tmp_path, check=True)
    module = tmp_path / "out" / "soft_clamp.py"
    module.write_text(module.read_text().replace("* (hi - lo)", "* (hi - lo) * 1.01"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "out"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout  # the test sees a 1% wrong gradient


def test_show_plot_draws_a_png(tmp_path: Path) -> None:
    spec = REPO_ROOT / "examples" / "mish.yaml"
    command = [*SYMGRAD, "show", str(spec), "--plot", "mish.png"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "drew mish.png" in done.stderr
    assert (tmp_path / "mish.png").read_bytes().startswith(b"\x89PNG")


MODULE_NAMES = [
    ("SoftClamp", "soft_clamp"),
    ("RMSNorm", "rms_norm"),
    ("StudentTNLL", "student_t_nll"),
    ("SwiGLU", "swiglu"),
    ("GEGLU", "geglu"),
    ("GELUTanh", "gelu_tanh"),
    ("BCEWithLogits", "bce_with_logits"),
    ("GaussianNLLLoss", "gaussian_nll_loss"),
    ("InfoNCE", "info_nce"),
    ("LeakyReLU", "leaky_relu"),
    ("KLDiv", "kl_div"),
    ("L2Normalize", "l2_normalize"),
    ("Model_v2", "model_v2"),
    ("Mish", "mish"),
]


@pytest.mark.parametrize(("name", "module"), MODULE_NAMES)
def test_module_names_keep_acronyms_together(name: str, module: str) -> None:
    assert snake_case(name) == module


def test_module_overrides_the_derived_name() -> None:
    spec = {"name": "SwiGLU", "module": "swi_glu", "inputs": {"x": "tensor"}, "outputs": {"y": "x"}}
    assert spec_from_dict(spec).module == "swi_glu"


def test_new_writes_a_starter_spec_that_generates_and_passes(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SYMGRAD, "new", "ScaledSwish", "-o", "specs"], cwd=tmp_path, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote specs/scaled_swish.yaml\n")
    spec = spec_from_dict(yaml.safe_load((tmp_path / "specs" / "scaled_swish.yaml").read_text()))
    assert spec.name == "ScaledSwish" and spec.module == "scaled_swish"
    command = [*SYMGRAD, "gen", "specs/scaled_swish.yaml", "-o", "out", "--test"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout + done.stderr


def test_new_never_overwrites_and_refuses_a_bad_name(tmp_path: Path) -> None:
    (tmp_path / "soft_clamp.yaml").write_text("mine")
    again = subprocess.run(
        [*SYMGRAD, "new", "SoftClamp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert again.returncode == 1 and "exists; not overwritten" in again.stderr
    assert (tmp_path / "soft_clamp.yaml").read_text() == "mine"
    bad = subprocess.run(
        [*SYMGRAD, "new", "soft_clamp"], cwd=tmp_path, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "CamelCase" in bad.stderr
