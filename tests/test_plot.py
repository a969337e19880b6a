"""`show --plot`: the curves drawn are the Function's and autograd's, and they agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import symgrad
from symgrad.present import plot
from tests.conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


@pytest.mark.parametrize("example", ["kinked_activation", "soft_clamp", "damped_wave"])
def test_plot_writes_a_png_of_curves_that_agree_with_autograd(example: str, tmp_path: Path) -> None:
    spec = symgrad.load_spec(EXAMPLES / f"{example}.yaml")
    path = plot.plot(spec, tmp_path / "plot.png")
    assert path.read_bytes().startswith(b"\x89PNG")
    function, reference = plot._load(spec)
    for item in spec.differentiable_inputs:
        if not item.is_tensor:
            continue
        _, ours = plot._sweep(spec, item, function)
        _, theirs = plot._sweep(spec, item, reference)
        assert ours.keys() == theirs.keys()
        for key in ours:
            torch.testing.assert_close(torch.tensor(ours[key]), torch.tensor(theirs[key]))


def test_plot_refuses_a_reduction_with_its_location(tmp_path: Path) -> None:
    spec = symgrad.load_spec(EXAMPLES / "softmax.yaml")
    with pytest.raises(symgrad.SpecError, match="elementwise"):
        plot.plot(spec, tmp_path / "plot.png")
    assert not (tmp_path / "plot.png").exists()


def test_each_panel_says_where_the_other_inputs_are_held() -> None:
    spec = symgrad.load_spec(EXAMPLES / "soft_clamp.yaml")
    lo = spec.inputs[1]
    assert plot.held_inputs(spec, lo) == " (x = 0, hi = 1)"


def test_long_titles_are_wrapped_to_the_panel() -> None:
    title = "VeryLongSpecName (examples/a/deeply/nested/folder/with/a/long_spec_name.yaml)"
    lines = plot.wrap(title, 3.2).split("\n")
    assert len(lines) > 1 and all(len(line) <= 35 for line in lines)
    assert "".join(lines).replace(" ", "") == title.replace(" ", "")


def test_a_missing_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    spec = symgrad.load_spec(EXAMPLES / "soft_clamp.yaml")
    with pytest.raises(symgrad.SpecError, match=r"\.venv/bin/python -m pip install matplotlib"):
        plot.plot(spec, tmp_path / "plot.png")
