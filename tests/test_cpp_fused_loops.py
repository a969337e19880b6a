"""The fused C++ loops built and run against autograd, over the ways inputs broadcast.

An input with a value per element, one covering the trailing dims and repeating over the
leading ones (read in place, its gradient summed in the loop), one too short to be worth
that (expanded), a single value, and one broadcast along a trailing dim (expanded); and a
loss averaged over its last dim (summed in the forward loop where that is every element,
ATen's forward otherwise, the forward loop storing the derivative and the backward loop
reading it in both); at 1 and 2 threads, in float64 and
float32, with shapes that leave partial vectors. Building costs about 30 s a spec, so
this runs in the C++ slow mode only:

    SYMGRAD_CPP_TESTS=all python -m pytest tests/test_cpp_fused_loops.py
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from symgrad.cli import main
from tests.conftest import CPP_SLOW_MODE

pytestmark = CPP_SLOW_MODE

# Names of their own: one process loads one build of an operator name, and a loader
# refuses another (the examples' huber_loss, say, in the same process).
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


HUBER = """\
name: FusedHuberCheck
inputs:
  x: {type: tensor, shape: [16]}
  target: {type: tensor, shape: [16], requires_grad: false}
  delta: {type: float, default: 1.0}
where:
  d: x - target
  a: abs(d)
outputs:
  loss: mean(where(a < delta, 0.5 * d**2, delta * (a - 0.5 * delta)), dim=-1)
mode: fused
"""


def huber(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.huber_loss(x, target, reduction="none").mean(-1)


def _build(folder: Path, text: str, module: str) -> ModuleType:
    """Generate `text` into `folder` and import its loader (which builds it)."""
    (folder / "spec.yaml").write_text(text, encoding="utf-8")
    assert main(["gen", str(folder / "spec.yaml"), "--target", "cpp", "-o", str(folder), "-q"]) == 0
    assert "forward_loop" in (folder / f"{module}.cpp").read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module, folder / f"{module}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The broadcasting spec's loader, imported."""
    threads = torch.get_num_threads()
    yield _build(tmp_path_factory.mktemp("fused_loops"), SPEC, "broadcast_mix")
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def built_huber(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The Huber spec's loader, imported."""
    threads = torch.get_num_threads()
    yield _build(tmp_path_factory.mktemp("fused_huber"), HUBER, "fused_huber_check")
    torch.set_num_threads(threads)


def _assert_as_accurate(
    mine: tuple[torch.Tensor, ...],
    theirs: tuple[torch.Tensor, ...],
    exact: tuple[torch.Tensor, ...],
    dtype: torch.dtype,
) -> None:
    """float64 to 1e-11; float32 within 4x autograd's own float32 error (both against
    float64), so the loop's sums are as accurate as torch's."""
    for n, (a, e, t) in enumerate(zip(mine, theirs, exact, strict=True)):
        assert a.shape == e.shape, n
        scale = t.abs().max()
        error = ((a.double() - t).abs().max() / scale).item()
        if dtype == torch.float64:
            assert error < 1e-11, n
        else:
            autograd_error = ((e.double() - t).abs().max() / scale).item()
            assert error <= 4 * autograd_error + 16 * torch.finfo(dtype).eps, n


SHAPES = [(3, 37), (3, 130), (1000, 130), (517, 256), (1, 100003), (40000, 3)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("rows", "cols"), SHAPES)
def test_values_and_gradients_match_autograd(
    built: ModuleType, threads: int, rows: int, cols: int
) -> None:
    torch.set_num_threads(threads)
    for dtype in (torch.float64, torch.float32):
        generator = torch.Generator().manual_seed(rows * cols)
        shapes = ((rows, cols), (cols,), (1,), (rows, 1))
        inputs = [torch.randn(s, dtype=dtype, generator=generator).requires_grad_() for s in shapes]
        out = built.broadcast_mix(*inputs)
        expected = reference(*inputs)
        cotangent = torch.randn(expected.shape, dtype=dtype, generator=generator)
        exact_inputs = [t.detach().double().requires_grad_() for t in inputs]
        exact_out = reference(*exact_inputs)
        _assert_as_accurate(
            (out, *torch.autograd.grad(out, inputs, cotangent)),
            (expected, *torch.autograd.grad(expected, inputs, cotangent)),
            (exact_out, *torch.autograd.grad(exact_out, exact_inputs, cotangent.double())),
            dtype,
        )


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(16,), (100003,), (5, 300), (1, 7)])
def test_a_loss_summed_in_the_loop_matches_autograd(
    built_huber: ModuleType, threads: int, shape: tuple[int, ...]
) -> None:
    torch.set_num_threads(threads)
    for dtype in (torch.float64, torch.float32):
        generator = torch.Generator().manual_seed(len(shape))
        x = (2 * torch.randn(shape, dtype=dtype, generator=generator)).requires_grad_()
        target = torch.randn(shape, dtype=dtype, generator=generator)
        out = built_huber.fused_huber_check(x, target)
        expected = huber(x, target)
        cotangent = torch.randn(expected.shape, dtype=dtype, generator=generator)
        exact_x = x.detach().double().requires_grad_()
        exact_out = huber(exact_x, target.double())
        _assert_as_accurate(
            (out, *torch.autograd.grad(out, x, cotangent)),
            (expected, *torch.autograd.grad(expected, x, cotangent)),
            (exact_out, *torch.autograd.grad(exact_out, exact_x, cotangent.double())),
            dtype,
        )


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(100003,), (5, 300)])
def test_the_gradient_is_written_over_the_stored_derivative_only_once_the_graph_is_freed(
    built_huber: ModuleType, threads: int, shape: tuple[int, ...]
) -> None:
    """A backward that keeps the graph writes a new gradient, so a second backward reads
    the stored derivative unchanged; one that frees it writes over the derivative. Also
    where the mean leaves a dim (5, 300): ATen's forward makes the loss, and the forward
    loop only stores the derivative."""
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(1)
    x = (2 * torch.randn(shape, dtype=torch.float64, generator=generator)).requires_grad_()
    target = torch.randn(shape, dtype=torch.float64, generator=generator)
    cotangent = torch.randn(shape[:-1], dtype=torch.float64, generator=generator)
    expected = torch.autograd.grad(huber(x, target), x, cotangent)[0]
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = built_huber.fused_huber_check(x, target)
    stored = saved[-1]  # x, target, then the derivative
    assert stored.shape == x.shape
    assert stored.data_ptr() not in (x.data_ptr(), target.data_ptr())
    kept = torch.autograd.grad(out, x, cotangent, retain_graph=True)[0]
    assert kept.data_ptr() != stored.data_ptr()
    freed = torch.autograd.grad(out, x, cotangent)[0]
    assert freed.data_ptr() == stored.data_ptr()
    torch.testing.assert_close(kept, expected)
    torch.testing.assert_close(freed, expected)


def test_the_forward_alone_under_no_grad_matches_autograd_s_values(
    built: ModuleType, built_huber: ModuleType
) -> None:
    """Under no_grad the operator runs the forward alone, whose loops are passed null
    for the calls and the derivative they would store (both kinds of loop)."""
    generator = torch.Generator().manual_seed(2)
    x, b, c, r = (torch.randn(s, generator=generator) for s in ((3, 130), (130,), (1,), (3, 1)))
    target = torch.randn(100003, generator=generator)
    y = torch.randn(100003, generator=generator)
    with torch.no_grad():
        torch.testing.assert_close(built.broadcast_mix(x, b, c, r), reference(x, b, c, r))
        torch.testing.assert_close(built_huber.fused_huber_check(y, target), huber(y, target))


def test_gradcheck_through_summed_gradients(built: ModuleType) -> None:
    """The repeating input (b, 130 values) and the single value (c) take the summed path."""
    generator = torch.Generator().manual_seed(0)
    shapes = ((3, 130), (130,), (1,), (3, 1))
    inputs = tuple(
        torch.randn(s, dtype=torch.float64, generator=generator).requires_grad_() for s in shapes
    )
    assert torch.autograd.gradcheck(built.broadcast_mix, inputs)
