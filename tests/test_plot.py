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
