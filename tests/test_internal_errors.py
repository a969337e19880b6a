"""A failure inside the generator is reported like a spec error, for every failing spec."""

from __future__ import annotations

from pathlib import Path

import pytest

import symgrad
from symgrad import api, cli
from tests.conftest import REPO_ROOT


def _explode(spec: object) -> object:
    raise ZeroDivisionError("boom\nsecond line")


def test_the_api_raises_an_internal_error_naming_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "derive", _explode)
    spec = symgrad.load_spec(REPO_ROOT / "examples" / "soft_clamp.yaml")
    with pytest.raises(symgrad.InternalError) as raised:
        symgrad.generate(spec)
    message = str(raised.value)
    assert message.startswith("examples/soft_clamp.yaml") or "soft_clamp.yaml: " in message
    assert "internal error: ZeroDivisionError: boom second line" in message
    assert "please report it" in message and "\n" not in message


def test_gen_lists_every_failing_spec_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("soft_clamp", "swish", "mish"):
        (specs / f"{name}.yaml").write_text(
            (REPO_ROOT / "examples" / f"{name}.yaml").read_text(), encoding="utf-8"
        )
    (specs / "broken.yaml").write_text("name: Broken\ninputs: {x: tensor}\n", encoding="utf-8")
    real = api.derive

    def fail_on_swish(spec: symgrad.Spec) -> object:
        if spec.name == "Swish":
            raise RuntimeError("boom")
        return real(spec)

    monkeypatch.setattr(api, "derive", fail_on_swish)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["gen", "specs", "-o", "out"])
    errors = capsys.readouterr().err
    assert status == 1
    assert "specs/swish.yaml: internal error: RuntimeError: boom" in errors
    assert "specs/broken.yaml" in errors  # the ordinary spec error is listed too
    assert "Traceback" not in errors
    assert not (tmp_path / "out").exists()  # nothing written
