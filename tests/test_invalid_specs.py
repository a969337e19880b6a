"""Every spec in tests/specs/invalid is refused with exactly the error its first line names.

Each file starts with `# error: <message>`, where `{path}` stands for the spec's path as
given to symgrad (relative to the repository root).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import symgrad
from symgrad.cli import main

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path("tests") / "specs" / "invalid"
SPECS = sorted((REPO_ROOT / CORPUS).glob("*.yaml"))
HEADER = "# error: "


def expected_error(name: str) -> str:
    """The message named on the first line of the spec `name`, for its relative path."""
    relative = (CORPUS / name).as_posix()
    first_line = (REPO_ROOT / relative).read_bytes().split(b"\n", 1)[0].decode("utf-8")
    assert first_line.startswith(HEADER), f"{relative} must start with {HEADER!r}"
    return first_line[len(HEADER) :].replace("{path}", relative)


def test_corpus_is_not_empty() -> None:
    assert len(SPECS) >= 30


@pytest.mark.parametrize("name", [p.name for p in SPECS])
def test_api_refuses(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading or, for mistakes only generation can see, generating raises the error."""
    monkeypatch.chdir(REPO_ROOT)
    expected = expected_error(name)
    with pytest.raises(symgrad.SpecError) as info:
        symgrad.generate(symgrad.load_spec((CORPUS / name).as_posix()))
    assert str(info.value) == expected


@pytest.mark.parametrize("name", [p.name for p in SPECS])
def test_cli_reports_and_writes_nothing(
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    expected = expected_error(name)
    status = main(["gen", (CORPUS / name).as_posix(), "-o", str(tmp_path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err == expected + "\n"
    assert captured.out == ""
    assert status == 1
    assert list(tmp_path.iterdir()) == []
