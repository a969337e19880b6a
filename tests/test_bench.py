"""The benchmark suite: a smoke run end to end, op and saved-tensor counts (never wall times)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as nnf

import symgrad
from bench import cases
from bench.build import (
    Generated,
    UnsupportedSpecError,
    generate_case,
    generate_cpp,
    import_source,
)
from bench.measure import Saved, measure_saved
from bench.opcount import OpCounts, count_kernels, count_ops
from bench.primitives import time_primitives
from bench.report import (
    CODE_HEADER,
    ONE_OFF_HEADER,
    PEAK_HEADER,
    SAVED_HEADER,
    SCALING_HEADER,
    TIME_HEADER,
    Header,
    render_report,
)
from bench.runner import ALTERNATIVES, Measurement, OneOff, Results, Row
from bench.scaling import INPUTS, random_formula
from symgrad.ad import costs as symgrad_costs
from symgrad.language import functions

REPO_ROOT = Path(__file__).absolute().parent.parent

SOURCE = """
class F(torch.autograd.Function):
    @staticmethod
    def forward(x: torch.Tensor, lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
        return lo + torch.sigmoid(x) * (hi - lo)

    @staticmethod
    def backward(ctx, grad_y) -> tuple[torch.Tensor | None, ...]:
        (x,) = ctx.saved_tensors
        lo, hi = ctx.numbers
        s = torch.sigmoid(x)
        return _reduce_to(grad_y * s * (1 - s) * (hi - lo), x.shape), None, None
"""


def _table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table under `header`, its header line included."""
    section = text.split(header, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    lines = [line for line in lines if not line.startswith("| --- |")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_quick_run_writes_every_table(tmp_path: Path) -> None:
    output = tmp_path / "quick.md"
    command = [sys.executable, "-m", "bench", "--quick", "--cases", "softplus,swish_beta"]
    command += ["--scaling", "--scaling-ops", "10", "--output", str(output)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = output.read_text(encoding="utf-8")
    assert text.startswith("# symgrad benchmark: cpu\n\nMachine: ")
    # A user's process keeps glibc's defaults, so the bench does unless told otherwise.
    assert "CPU heap: glibc's defaults, as in a user's process" in text
    for header in (TIME_HEADER, SAVED_HEADER, PEAK_HEADER):
        head, *rows = _table_rows(text, header)
        assert head[:4] == ["case", "elements", "eager", "generated"]
        assert [row[:2] for row in rows] == [["softplus", "4096"], ["swish_beta", "4096"]]
        assert rows[1][head.index("builtin")] == "-"  # torch has no swish with a beta
    head, *rows = _table_rows(text, CODE_HEADER)
    assert [row[0] for row in rows] == ["softplus", "swish_beta"]
    assert all(int(row[head.index("forward ops")]) >= 1 for row in rows)
    head, *rows = _table_rows(text, SCALING_HEADER)
    assert [row[head.index("status")] for row in rows] == ["ok"]
    assert ONE_OFF_HEADER not in text  # --quick builds no C++ and compiles nothing
    assert "## Definitions" in text


def test_a_run_without_save_leaves_the_committed_results_alone(tmp_path: Path) -> None:
    """Reports go to build/bench/ (under the working directory) unless --save asks."""
    (tmp_path / "bench" / "results").mkdir(parents=True)
    committed = tmp_path / "bench" / "results" / "cpu.md"
    committed.write_text("committed\n", encoding="utf-8")
    command = [sys.executable, "-m", "bench", "--quick", "--cases", "softplus"]
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert committed.read_text(encoding="utf-8") == "committed\n"
    assert "bench: wrote build/bench/cpu.md" in done.stderr
    assert "bench: wrote build/bench/cpu.png" in done.stderr  # the ratios as a chart
    assert (tmp_path / "build" / "bench" / "cpu.png").read_bytes().startswith(b"\x89PNG")
    assert (
        (tmp_path / "build" / "bench" / "cpu.md")
        .read_text(encoding="utf-8")
        .startswith("# symgrad benchmark: cpu")
    )
    refused = subprocess.run(
        [*command, "--save"], cwd=tmp_path, env=environment, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "--save" in refused.stderr


def test_generated_ops_stay_within_the_cheap_gradient_bound(tmp_path: Path) -> None:
    for name in ("softplus", "swish_beta"):
        ops = generate_case(cases.SPECS / f"{name}.yaml", tmp_path).ops
        assert ops.forward >= 1 and ops.backward <= 4 * ops.forward


def test_generated_softplus_saves_one_tensor_where_autograd_saves_two(tmp_path: Path) -> None:
    x = torch.randn(64, requires_grad=True)
    generated = generate_case(cases.SPECS / "softplus.yaml", tmp_path).function
    assert measure_saved(cases.softplus, (x,)).tensors == 2  # exp's result, log's input
    assert measure_saved(generated, (x,)).tensors == 1
    assert measure_saved(generated, (x,)).nbytes == 64 * 4


def test_kernels_are_counted_at_dispatch() -> None:
    x = torch.randn(8, requires_grad=True)
    grad = torch.ones(8)
    assert count_kernels(cases.softplus, (x,), grad) == 5  # exp, add, log; div, mul
    assert count_kernels(nnf.softplus, (x,), grad) == 2  # softplus, softplus_backward


def test_saved_bytes_count_each_storage_once() -> None:
    x = torch.randn(8, 4, requires_grad=True)
    saved = measure_saved(lambda t: t[0] * t[1] * t.sum(), (x,))
    # x once for its two row views, the product of the rows, the 0-d sum.
    assert (saved.tensors, saved.nbytes) == (3, x.nbytes + 4 * 4 + 4)


def test_op_count_reads_tensor_operations_only() -> None:
    ops = count_ops(SOURCE)
    # forward: sigmoid, *, + (hi - lo is numbers); backward: sigmoid, 1 - s, three *.
    assert (ops.forward, ops.backward) == (3, 5)


def test_random_formulas_are_seeded_and_use_every_input() -> None:
    formula = random_formula(30, seed=1)
    assert formula == random_formula(30, seed=1)
    assert 30 <= formula.ops <= 31
    text = " ".join([*formula.spec["where"].values(), formula.spec["outputs"]["out"]])
    assert all(name in text.split() or f"({name})" in text for name in INPUTS)
    symgrad.spec_from_dict(formula.spec)


def test_a_spec_symgrad_refuses_is_reported_unsupported(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: Bad\ninputs:\n  x: tensor\noutputs:\n  y: frobnicate(x)\n")
    with pytest.raises(UnsupportedSpecError, match="frobnicate"):
        generate_case(spec, tmp_path)


def test_an_internal_error_stops_the_run_rather_than_emptying_a_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "fine.yaml"
    spec.write_text("name: Fine\ninputs:\n  x: tensor\noutputs:\n  y: exp(x)\n")

    def broken(*args: object, **kwargs: object) -> dict[str, str]:
        raise symgrad.InternalError(symgrad.Location(str(spec)), RuntimeError("a bug"))

    monkeypatch.setattr(symgrad, "generate", broken)
    with pytest.raises(symgrad.InternalError):
        generate_case(spec, tmp_path)
    with pytest.raises(symgrad.InternalError):
        generate_cpp(spec, tmp_path, fused=True)


def test_imported_modules_are_registered_for_torch_compile(tmp_path: Path) -> None:
    module = import_source("bench_test_module", "VALUE = 3\n", tmp_path)
    assert sys.modules["bench_test_module"] is module and module.VALUE == 3
    del sys.modules["bench_test_module"]


def test_cuda_report_has_bandwidth_and_copy_targets() -> None:
    generated = Generated(cases.softplus, "", 0.1, OpCounts(3, 5))
    measured = {
        name: Measurement((1e-3, 1e-3), Saved(1, 400), 800, 0.0, 2) for name in ALTERNATIVES
    }
    row = Row("softplus", 100, generated, False, measured, ideal_bytes=2000, copy_seconds=1e-3)
    text = render_report(Header("t", "m", "c", "s"), Results([row]), cuda=True)
    head, *rows = _table_rows(text, "## Bandwidth")
    assert head[:4] == ["case", "elements", "ideal MB", "copy GB/s"] and len(rows) == 1
    head, *rows = _table_rows(text, "## Targets")
    assert head[-1] == "fused >= 80% copy" and rows[0][-1] == "yes (250%)"


def _row(case: str) -> Row:
    """A row of made-up measurements of every alternative, for the report's tables."""
    generated = Generated(cases.softplus, "", 0.1, OpCounts(3, 5))
    measured = {
        name: Measurement((1e-3, 1e-3), Saved(1, 400), 800, 0.0, 2) for name in ALTERNATIVES
    }
    return Row(case, 100, generated, False, measured, ideal_bytes=2000, copy_seconds=None)


def test_report_has_one_off_costs_with_dashes_where_not_measured() -> None:
    one_off = [
        OneOff("silu", {"cpp": 31.25, "cpp_fused": 40.5}, {"cpp": 0.5, "cpp_fused": 0.75}, 3.5),
        OneOff("huber", {"cpp": 30.0}, {"cpp": 0.25}, None),  # no fused C++, no compile
        OneOff("mish"),  # neither --cpp nor torch.compile
    ]
    results = Results([_row("silu"), _row("huber"), _row("mish")], one_off)
    text = render_report(Header("t", "m", "c", "s"), results, cuda=False)
    assert text.index(CODE_HEADER) < text.index(ONE_OFF_HEADER) < text.index("## Targets")
    head, *rows = _table_rows(text, ONE_OFF_HEADER)
    assert head == [
        "case",
        "cpp build",
        "cpp_fused build",
        "cpp load (cached)",
        "cpp_fused load (cached)",
        "compile first call",
    ]
    assert rows == [
        ["silu", "31.25", "40.50", "0.50", "0.75", "3.50"],
        ["huber", "30.00", "-", "0.25", "-", "-"],
        ["mish", "-", "-", "-", "-", "-"],
    ]


def test_report_leaves_out_one_off_costs_when_none_were_measured() -> None:
    results = Results([_row("silu")], [OneOff("silu")])
    assert ONE_OFF_HEADER not in render_report(Header("t", "m", "c", "s"), results, cuda=False)


def test_primitive_costs_are_relative_to_a_multiplication() -> None:
    costs = {cost.name: cost for cost in time_primitives(4096, 1, torch.device("cpu"))}
    assert costs["mul"].relative == 1.0
    assert {"tanh", "pow", "softplus", "mish", "mish_backward", "mish.cpu_form"} <= set(costs)


def test_calibration_writes_a_cost_table_that_symgrad_reads(tmp_path: Path) -> None:
    output = tmp_path / "costs.json"
    command = [sys.executable, "-m", "bench", "--calibrate", "--quick", "--output", str(output)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    table = symgrad_costs.parse(output.read_text())
    assert table.command == "python -m bench --calibrate --quick --output " + str(output)
    assert table.of("mul") == 1.0 and set(symgrad_costs.ARITHMETIC) <= set(table.relative)
    # Every function of the language is priced (polygamma takes an integer order).
    assert set(functions.FUNCTIONS) - {"polygamma"} <= set(table.relative)


def test_the_memory_table_measures_every_case(tmp_path: Path) -> None:
    from bench import memory

    results = {case.name: memory.measure(case, rows=2, repeats=1) for case in memory.CASES}
    for name, found in results.items():
        assert found["original"] and found["eager"], name
        for save in memory.SAVES:
            assert found[save] and found[f"{save} ms"], (name, save)
    # The original of the fake quantiser saves one bool per element: 2 rows of 1024.
    assert results["fake_quantize"]["original"] == 2 * memory.CHANNELS
    # Issue 30's targets: memory saves no more than the original, balanced than eager.
    for name, found in results.items():
        assert found["memory"] <= found["original"], name
        assert found["balanced"] <= found["eager"], name
    table = memory.render(results, 2, ["--rows", "2"])
    assert table.count("\n| ") == len(memory.CASES) + 2  # the header, its rule, the rows


@pytest.mark.parametrize("case", cases.CASES, ids=lambda case: case.name)
def test_handwritten_function_has_the_reference_gradients(case: cases.Case) -> None:
    """Each hand-written baseline computes the case's formula and its exact gradients."""
    from bench.handwritten import HANDWRITTEN
    from bench.small import SHAPES, small_inputs

    for shape in SHAPES:
        inputs = tuple(
            t.detach().double().requires_grad_(t.requires_grad) for t in small_inputs(case, shape)
        )
        hand = HANDWRITTEN[case.name](*inputs, **case.numbers)
        reference = case.reference(*inputs, **case.numbers)
        torch.testing.assert_close(hand, reference)
        grad = torch.randn_like(reference)
        wanted = tuple(t for t in inputs if t.requires_grad)
        got = torch.autograd.grad(hand, wanted, grad)
        expected = torch.autograd.grad(reference, wanted, grad)
        torch.testing.assert_close(got, expected)


def test_small_table_runs_and_renders(tmp_path: Path) -> None:
    """The small-size table times every alternative of a case at both shapes."""
    from bench.small import SHAPES, measure_case, render

    (case,) = cases.select_cases(("huber",))
    rows = measure_case(case, tmp_path, rounds=2, batch=1)
    assert [row.shape for row in rows] == list(SHAPES)
    assert set(rows[0].ratios) == {"generated", "builtin"}
    text = render(rows, "python -m bench.small")
    assert "| huber | [512, 64] |" in text


def test_inputs_are_cast_to_the_dtype_asked_for_and_stay_leaves() -> None:
    from bench.runner import _inputs

    case = cases.select_cases(("huber",))[0]
    (x, target), grad = _inputs(case, 64, torch.device("cpu"), torch.bfloat16)
    assert (x.dtype, target.dtype, grad.dtype) == (torch.bfloat16,) * 3
    assert x.is_leaf and x.requires_grad and not target.requires_grad


def test_profile_tables_name_the_kernels_of_both_alternatives() -> None:
    from bench.profile_cases import profile_case

    case = cases.select_cases(("silu",))[0]
    text = profile_case(case, 256, torch.device("cpu"), torch.float32)
    assert text.count("```") == 4
    assert "aten::silu" in text.split("### generated")[1]
    assert "aten::sigmoid" in text.split("### generated")[0]


def test_eager_cpu_table_runs_and_each_formula_is_its_spec(tmp_path: Path) -> None:
    """Each spec of bench/eager_specs/ gives eager's values and gradients, and is timed."""
    from bench.build import generate_case
    from bench.eager_cpu import CASES, SPECS, measure, render

    for case in CASES:
        generated = generate_case(SPECS / f"{case.name}.yaml", tmp_path).function
        inputs = case.make_inputs((6, 5))
        wanted = tuple(t for t in inputs if t.requires_grad)
        got, expected = generated(*inputs), case.eager(*inputs)
        torch.testing.assert_close(got, expected)
        grad = torch.randn_like(expected)
        torch.testing.assert_close(
            torch.autograd.grad(got, wanted, grad), torch.autograd.grad(expected, wanted, grad)
        )
    row = measure(CASES[0], tmp_path, rounds=3)
    assert row.eager_saved > 0 and row.generated_saved > 0
    # Layer norm saves xc and rstd, made in its forward: none of its saved bytes are inputs.
    assert row.generated_saved_inputs == 0 and row.generated_peak is not None
    text = render([row], "default", "python -m bench.eager_cpu")
    assert "Allocator: glibc's defaults" in text and "| layer_norm |" in text
