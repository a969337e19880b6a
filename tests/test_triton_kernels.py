"""The Triton kernels of `mode: fused` (Note [Triton kernels]), run by Triton's interpreter
on CPU tensors: values and gradients against the Function's, a per-channel broadcast
input, sizes not a multiple of the block, float32 and bfloat16; the eager Function's saved
tensors (Note [eager kernels]: the inputs, no new buffer), a broadcast input's gradient
summed without a buffer of the full shape, and double backward (with
`triton_keeps_inputs` for an input the backward kernel does not read). Losses (a mean and
a sum over every element) and a spec of two outputs against their formulas in float64,
with one output's gradient None, through the eager Function and the operator."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import dataclasses, torch
import symgrad.api as api
FORMULAS = {  # softplus: log1p by Goldberg; screened: a backward that reads y
    "softplus": "softplus(x)",
    "screened": "4 * (x**-12 - x**-6) * exp(-x / 2)",
    "unread": "3 * x + sin(c)",  # grad_x = 3 grad_y: the backward kernel reads no x
}
def make_spec(name):
    if name in FORMULAS:
        inputs = {"x": "tensor", **({"c": "tensor"} if name == "unread" else {})}
        made = {"name": "Case", "inputs": inputs, "outputs": {"y": FORMULAS[name]}}
        return dataclasses.replace(api.spec_from_dict(made), mode="fused", module=name)
    return dataclasses.replace(api.load_spec(f"examples/{name}.yaml"), mode="fused")
CASES = (("mish_fused", 0), ("swish", 1027), ("softplus", 0), ("screened", 0), ("unread", -1))
for name, channels in CASES:
    spec = dataclasses.replace(make_spec(name), name="Case")
    module = api.load_module(spec)
    fused, plain = getattr(module, spec.module), getattr(module, "_plain_" + spec.module)
    # Whether each gradient reaches torch already of its input's shape: a per-channel
    # input's is summed in the kernel (Note [eager kernels]), not by torch.
    reduced, by_torch = [], module._triton_summed
    module._triton_summed = lambda g, shape: reduced.append(g.shape == shape) or by_torch(g, shape)
    for dtype, tol, gtol in ((torch.float32, 1e-5, 1e-4), (torch.bfloat16, 1e-2, 2e-2)):
        x = torch.randn(3, 1027) * 8 if name != "screened" else torch.rand(3, 1027) + 0.8
        args = [x.to(dtype).requires_grad_()]
        if channels:
            other = torch.rand(channels, dtype=dtype) if channels > 0 else torch.randn_like(x)
            args.append((other.to(dtype) + 0.5).requires_grad_())
        packed = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            y = fused(*args)
        assert type(y.grad_fn).__name__ == "_CaseTritonBackward", type(y.grad_fn).__name__
        # Nothing stored for the backward: it saves inputs (or the output), no new buffer.
        own = {t.data_ptr() for t in (*args, y)}
        assert packed and all(p.data_ptr() in own for p in packed), name
        if name in ("mish_fused", "softplus"):  # the input alone, as torch.compile's
            assert [p.data_ptr() for p in packed] == [args[0].data_ptr()], name
        # The reference: the Function in float64 on the same (rounded) inputs.
        exact = [a.detach().double().requires_grad_() for a in args]
        reference = plain(*exact)
        torch.testing.assert_close(y.double(), reference, atol=tol, rtol=tol)
        g = torch.randn_like(y)
        wanted = torch.autograd.grad(reference, exact, g.double())
        # In bfloat16 the stored values are rounded as eager's are: at most twice its error.
        eager = torch.autograd.grad(plain(*args), args, g)
        kept = torch.autograd.grad(y, args, g, retain_graph=True)
        got = torch.autograd.grad(y, args, g)
        torch.testing.assert_close(got, kept, atol=0, rtol=0)
        for a, b, e in zip(got, wanted, eager):
            scale = max(1.0, b.abs().max().item())
            if dtype == torch.float32:
                torch.testing.assert_close(a.double(), b, atol=gtol * scale, rtol=gtol)
            else:
                bound = max(2 * (e.double() - b).abs().max().item(), gtol * scale)
                assert (a.double() - b).abs().max().item() <= bound, name
    assert reduced and all(reduced), (name, reduced)
    if name == "swish":  # beta's gradient: partial sums per tile, no [3, 1027] buffer for it
        made, empty = [], torch.empty
        y = fused(*args)
        torch.empty = lambda *a, **k: made.append(tuple(a[0])) or empty(*a, **k)
        try:
            torch.autograd.grad(y, args, torch.ones_like(y))
        finally:
            torch.empty = empty
        assert made.count(tuple(y.shape)) == 1 and len(made) == 2, made
    x = (torch.rand(2, max(channels, 5)) + 0.8).requires_grad_()
    other = torch.rand(channels) if channels > 0 else torch.rand_like(x)
    rest = [(other + 0.5).requires_grad_()] if channels else []
    if name == "unread":  # an input the backward kernel does not read: not kept unless asked
        try:
            torch.autograd.grad(fused(x, *rest).sum(), x, create_graph=True)
            raise AssertionError("double backward without the inputs")
        except RuntimeError as error:
            assert "triton_keeps_inputs" in str(error), error
    module.triton_keeps_inputs = True
    y = fused(x, *rest)
    assert type(y.grad_fn).__name__ == "_CaseTritonBackward"
    first = torch.autograd.grad(y.sum(), [x, *rest], create_graph=True)
    plain_first = torch.autograd.grad(plain(x, *rest).sum(), [x, *rest], create_graph=True)
    torch.testing.assert_close(first, plain_first)
    sums = [sum(g.sum() for g in gs) for gs in (first, plain_first)]
    second = [torch.autograd.grad(total, [x, *rest], materialize_grads=True) for total in sums]
    torch.testing.assert_close(*second)
    module.triton_keeps_inputs = False
# Forward-mode AD (dual tensors): the Function's jvp, not kernels that drop the tangent.
import torch.autograd.forward_ad as forward_ad
with forward_ad.dual_level():
    y = fused(forward_ad.make_dual(x.detach(), torch.ones_like(x)), *rest)
    tangent = forward_ad.unpack_dual(y).tangent
    assert tangent is not None and "Triton" not in type(y.grad_fn).__name__
_, wanted = torch.func.jvp(lambda t: plain(t, *rest), (x.detach(),), (torch.ones_like(x),))
torch.testing.assert_close(tangent, wanted)
# Losses (an output summed or averaged over every element) and several outputs.
import torch.nn.functional as F
LOSSES = {  # name: (inputs, outputs, the formula in plain torch)
    "huber_mean": (
        {"x": "tensor", "t": "tensor"},
        {"y": "mean(where(abs(x - t) < 1, 0.5 * (x - t)**2, abs(x - t) - 0.5))"},
        lambda x, t: (F.huber_loss(x, t),),
    ),
    "squares_sum": (
        {"x": "tensor", "t": "tensor"},
        {"y": "sum((x - t)**2 * sin(x))"},
        lambda x, t: (((x - t) ** 2 * torch.sin(x)).sum(),),
    ),
    "huber_rows": (  # per row: the forward over tiles of rows, t per channel
        {"x": "tensor", "t": "tensor"},
        {"y": "mean(where(abs(x - t) < 1, 0.5 * (x - t)**2, abs(x - t) - 0.5), dim=-1)"},
        lambda x, t: (F.huber_loss(x, t.expand_as(x), reduction="none").mean(-1),),
    ),
    "rows_two": (  # two per-row losses, one keeping the dim
        {"x": "tensor", "t": "tensor"},
        {"y": "mean((x - t)**2, dim=-1, keepdim=True)", "z": "sum(sin(x - t), dim=-1)"},
        lambda x, t: (((x - t) ** 2).mean(-1, keepdim=True), torch.sin(x - t).sum(-1)),
    ),
    "two": (  # c per channel: its gradient summed by tiles of rows in the kernel
        {"x": "tensor", "c": "tensor"},
        {"y": "sin(x) * c", "z": "exp(x) + c"},
        lambda x, c: (torch.sin(x) * c, torch.exp(x) + c),
    ),
}
for name, (inputs, outputs, formula) in LOSSES.items():
    made = {"name": "Case", "inputs": inputs, "outputs": outputs}
    spec = dataclasses.replace(api.spec_from_dict(made), mode="fused", module=name)
    module = api.load_module(spec)
    fused = getattr(module, name)
    # Each gradient the backward may go without: None (never a tensor of zeros) when missing.
    missing, by_read = [], getattr(module, "_triton_read", None)
    if by_read is not None:
        module._triton_read = lambda t, *rest: missing.append(t is None) or by_read(t, *rest)
    for dtype, tol, gtol in ((torch.float32, 1e-5, 1e-5), (torch.bfloat16, 1e-2, 2e-2)):
        x = torch.randn(3, 1027) * 2  # 3081 elements: not a multiple of the block
        per_channel = name in ("two", "huber_rows")
        other = torch.rand(1027) + 0.5 if per_channel else x + torch.randn_like(x)
        args = [x.to(dtype).requires_grad_(), other.to(dtype).requires_grad_()]
        packed = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            got = fused(*args)
        got = got if isinstance(got, tuple) else (got,)
        assert all(type(o.grad_fn).__name__ == "_CaseTritonBackward" for o in got), name
        # The inputs alone are saved: no buffer of the full shape made for the backward.
        assert [p.data_ptr() for p in packed] == [a.data_ptr() for a in args], name
        exact = [a.detach().double().requires_grad_() for a in args]
        wanted = formula(*exact)
        for o, w in zip(got, wanted):
            assert o.dtype == dtype and o.shape == w.shape, (name, o.shape)
            torch.testing.assert_close(o.double(), w, atol=tol * w.abs().max().item(), rtol=tol)
        # Each output's gradient alone (the other's None), then both.
        for chosen in [(k,) for k in range(len(got))] + ([(0, 1)] if len(got) > 1 else []):
            g = [torch.randn_like(got[k]) for k in chosen]
            grads = torch.autograd.grad([got[k] for k in chosen], args, g, retain_graph=True)
            g64, kept = [v.double() for v in g], dict(retain_graph=True)
            want = torch.autograd.grad([wanted[k] for k in chosen], exact, g64, **kept)
            for a, b in zip(grads, want):
                scale = max(1.0, b.abs().max().item())
                torch.testing.assert_close(a.double(), b, atol=gtol * scale, rtol=gtol)
    # Two dtypes, one missing gradient each time one output's alone is differentiated.
    assert missing.count(True) == (4 if len(got) > 1 else 0), (name, missing)
    # The operator (triton_op and its registered autograd) gives the same.
    operator = getattr(module, f"_{name}_triton_forward")
    args = [a.detach().float().requires_grad_() for a in args]
    direct, eager = operator(*args), fused(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    torch.testing.assert_close(tuple(direct), eager)
    torch.testing.assert_close(
        torch.autograd.grad(direct[0].sum(), args), torch.autograd.grad(eager[0].sum(), args)
    )
    # Double backward: the Function's operations, from the saved inputs (two: y's
    # gradient None).
    last = lambda outputs: (outputs if isinstance(outputs, tuple) else (outputs,))[-1].sum()
    plain = getattr(module, "_plain_" + name)
    first = torch.autograd.grad(last(fused(*args)), args, create_graph=True)
    plain_first = torch.autograd.grad(last(plain(*args)), args, create_graph=True)
    torch.testing.assert_close(first, plain_first)
    sums = [sum(g.sum() for g in gs) for gs in (first, plain_first)]
    second = [torch.autograd.grad(total, args, materialize_grads=True) for total in sums]
    torch.testing.assert_close(*second)
print("ok")
"""


def _run(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The script in a fresh interpreter: TRITON_INTERPRET is read when triton is imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **environment}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_kernels_match_the_function_in_the_interpreter() -> None:
    result = _run({"TRITON_INTERPRET": "1", "SYMGRAD_TRITON_CPU": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_cpu_tensors_keep_the_function_without_the_opt_in() -> None:
    result = _run({"TRITON_INTERPRET": "1", "SYMGRAD_TRITON_CPU": "0"})
    assert result.returncode != 0
    assert "AssertionError: CaseBackward" in result.stderr


def test_specs_outside_the_slice_get_no_kernels() -> None:
    import symgrad.api as api
    from symgrad.ad.derive import derive
    from symgrad.backends.triton.kernels import triton_kernels

    def kernels(outputs: dict[str, str]) -> object:
        made = {"name": "Case", "inputs": {"x": "tensor", "c": "tensor"}, "outputs": outputs}
        return triton_kernels(derive(dataclasses.replace(api.spec_from_dict(made), mode="fused")))

    spec = api.load_spec(ROOT / "examples/huber_loss.yaml")
    assert triton_kernels(derive(dataclasses.replace(spec, mode="fused"))) is not None
    assert triton_kernels(derive(api.load_spec(ROOT / "examples/swish.yaml"))) is None
    assert kernels({"y": "sin(x) * c", "z": "exp(x) + c"}) is not None
    # A mean whose element count is that of a named forward value (tanh's).
    assert kernels({"y": "mean(tanh(x - c))"}) is not None
    assert kernels({"y": "mean((x - c)**2, dim=-1)"}) is not None
    # An output of another shape than the kernels' (c's alone, where c is broadcast), a
    # sum of c alone beside x's output, a mean over another dim than the last, a sum over
    # every element beside one over the last dim: the Function.
    assert kernels({"y": "sin(x)", "z": "exp(c)"}) is None
    assert kernels({"y": "sin(x) * c", "z": "sum(c**2)"}) is None
    assert kernels({"y": "mean((x - c)**2, dim=0)"}) is None
    assert kernels({"y": "sum((x - c)**2)", "z": "sum((x - c)**2, dim=-1)"}) is None


def test_the_module_imports_and_runs_without_triton() -> None:
    script = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch, dataclasses, symgrad.api as api\n"
        "spec = api.load_spec('examples/mish_fused.yaml')\n"
        "module = api.load_module(spec)\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "y = module.mish_fused(x)\n"
        "assert module.triton is None and type(y.grad_fn).__name__ == 'MishFusedBackward'\n"
        "torch.testing.assert_close(y, torch.nn.functional.mish(x))\n"
        "print('ok')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TRITON_INTERPRET": "1",
        "SYMGRAD_TRITON_CPU": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
