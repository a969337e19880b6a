"""The fused C++ loops built and run against autograd, over the ways inputs broadcast.

An input with a value per element, one covering the trailing dims and repeating over the
leading ones (read in place, its gradient summed in the loop), one too short to be worth
that (expanded), a single value, and one broadcast along a trailing dim (expanded); at 1
and 2 threads, in float64 and float32, with shapes that leave partial vectors. Building
costs about 30 s, so this runs in the C++ slow mode only:

    SYMGRAD_CPP_TESTS=all python -m pytest tests/test_cpp_fused_loops.py
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from symgrad.cli import main

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SYMGRAD_CPP_TESTS") != "all", reason="C++ slow mode only"),
    pytest.mark.skipif(
        shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler"
    ),
]

SPEC = """\
name: BroadcastMix
inputs:
  x: {type: tensor, shape: [3, 130]}
  b: {type: tensor, shape: [130]}
  c: {type: tensor, shape: [1]}
  r: {type: tensor, shape: [3, 1]}
  k: {type: float, default: 0.5}
outputs:
  y: x * sigmoid(b * x + c) + k * r * exp(-c * x)
mode: fused
"""


def reference(x: torch.Tensor, b: torch.Tensor, c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(b * x + c) + 0.5 * r * torch.exp(-c * x)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The spec's loader, imported (which builds it)."""
    folder: Path = tmp_path_factory.mktemp("fused_loops")
    (folder / "spec.yaml").write_text(SPEC, encoding="utf-8")
    assert main(["gen", str(folder / "spec.yaml"), "--target", "cpp", "-o", str(folder), "-q"]) == 0
    assert "forward_loop" in (folder / "broadcast_mix.cpp").read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("broadcast_mix", folder / "broadcast_mix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)


SHAPES = [(3, 37), (3, 130), (1000, 130), (517, 256), (1, 100003), (40000, 3)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("rows", "cols"), SHAPES)
def test_values_and_gradients_match_autograd(
    built: ModuleType, threads: int, rows: int, cols: int
) -> None:
    """float64 to 1e-11; float32 within 4x autograd's own float32 error (both against
    float64), so the loop's summed gradients are as accurate as torch's sums."""
    torch.set_num_threads(threads)
    for dtype in (torch.float64, torch.float32):
        generator = torch.Generator().manual_seed(rows * cols)
        shapes = ((rows, cols), (cols,), (1,), (rows, 1))
        inputs = [torch.randn(s, dtype=dtype, generator=generator).requires_grad_() for s in shapes]
        out = built.broadcast_mix(*inputs)
        expected = reference(*inputs)
        cotangent = torch.randn(expected.shape, dtype=dtype, generator=generator)
        mine = (out, *torch.autograd.grad(out, inputs, cotangent))
        theirs = (expected, *torch.autograd.grad(expected, inputs, cotangent))
        exact_inputs = [t.detach().double().requires_grad_() for t in inputs]
        exact_out = reference(*exact_inputs)
        exact = (exact_out, *torch.autograd.grad(exact_out, exact_inputs, cotangent.double()))
        for name, a, e, t in zip(["y", "x", "b", "c", "r"], mine, theirs, exact, strict=True):
            assert a.shape == e.shape, name
            scale = t.abs().max()
            error = ((a.double() - t).abs().max() / scale).item()
            if dtype == torch.float64:
                assert error < 1e-11, name
            else:
                autograd_error = ((e.double() - t).abs().max() / scale).item()
                assert error <= 4 * autograd_error + 16 * torch.finfo(dtype).eps, name


def test_gradcheck_through_summed_gradients(built: ModuleType) -> None:
    """The repeating input (b, 130 values) and the single value (c) take the summed path."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((3, 130), (130,), (1,), (3, 1))
    inputs = tuple(
        torch.randn(s, dtype=torch.float64, generator=generator).requires_grad_() for s in shapes
    )
    assert torch.autograd.gradcheck(built.broadcast_mix, inputs)
