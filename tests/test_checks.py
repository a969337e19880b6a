"""The spec's `test:` section is honoured by the generated test (issue 12, item 4).

Each case writes a spec with a test section, generates it, runs pytest on the generated
test, and reads pytest's report: the settings must change what runs and what passes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from symgrad.api import generate, spec_from_dict

BASE = {"name": "Tuned", "inputs": {"x": "tensor"}, "outputs": {"y": "x * tanh(x)"}}


def _run_generated(tmp_path: Path, test: dict[str, object], *pytest_args: str) -> str:
    """Generate BASE with `test`, run its test on the CPU, and return pytest's report."""
    spec = spec_from_dict({**BASE, "test": test})
    for name, source in generate(spec).items():
        (tmp_path / name).write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", "-k", "not cuda",
         *pytest_args, "test_tuned.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_defaults_pass(tmp_path: Path) -> None:
    report = _run_generated(tmp_path, {})
    assert " passed" in report and "failed" not in report, report


def test_zero_tolerance_in_a_low_precision_fails(tmp_path: Path) -> None:
    """Fixed tolerances replace the default comparison: zero in float16 cannot pass."""
    report = _run_generated(tmp_path, {"tolerances": {"float16": {"rtol": 0, "atol": 0}}})
    assert "test_low_precision[torch.float16-cpu] FAILED" in report, report
    assert "test_low_precision[torch.float32-cpu] PASSED" in report


def test_float64_tolerances_are_written_for_every_comparison() -> None:
    spec = spec_from_dict({**BASE, "test": {"tolerances": {"float64": {"rtol": 0, "atol": 1}}}})
    source = generate(spec)["test_tuned.py"]
    assert 'torch.float64: {"rtol": 0.0, "atol": 1.0}' in source
    assert "torch.testing.assert_close(value, want)" not in source  # all go through them


def test_dtypes_and_skips(tmp_path: Path) -> None:
    test = {"dtypes": ["float32", "bfloat16"], "skip": {"bfloat16": "eight bits are too few"}}
    report = _run_generated(tmp_path, test)
    assert "test_low_precision[torch.float32-cpu] PASSED" in report, report
    assert "float16]" not in report.replace("bfloat16]", "")
    assert "SKIPPED" in report and "eight bits are too few" in report


def test_points_run_gradcheck_on_each_draw(tmp_path: Path) -> None:
    report = _run_generated(tmp_path, {"points": 3})
    for seed in range(3):
        assert f"test_gradcheck[cpu-{seed}] PASSED" in report, report
        assert f"test_gradgradcheck[cpu-{seed}] PASSED" in report


def test_shapes_and_domains_are_sampled(tmp_path: Path) -> None:
    spec = spec_from_dict({**BASE, "test": {"shapes": {"x": [5, 2]}, "domains": {"x": [2, 3]}}})
    source = generate(spec)["test_tuned.py"]
    assert '"x": _uniform((5, 2), 2.0, 3.0, generator)' in source


def test_a_domain_float16_cannot_hold_skips_float16_with_the_reason() -> None:
    spec = spec_from_dict({**BASE, "test": {"domains": {"x": [0, 1e5]}}})
    source = generate(spec)["test_tuned.py"]
    assert "float16 cannot hold the test domain [0.0, 100000.0] of x" in source


def test_the_section_reads_from_yaml(tmp_path: Path) -> None:
    text = yaml.safe_dump({**BASE, "test": {"dtypes": ["float32"], "points": 2}})
    (tmp_path / "tuned.yaml").write_text(text)
    from symgrad.api import load_spec

    checks = load_spec(tmp_path / "tuned.yaml").checks
    assert checks.dtypes == ("float32",) and checks.points == 2
