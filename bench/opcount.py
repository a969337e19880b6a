"""Count the tensor operations in a generated Function's forward and backward, from its source.

An operation is one call of a `torch.*` function, one tensor method call (`t.sum(...)`), or
one arithmetic operator (`+ - * / **`, unary minus) with at least one tensor operand. An
operator between numbers only (`hi - lo`, `-gamma` for a float input) is not counted, and
neither is the module's `_reduce_to` helper (a no-op unless an input was broadcast) or any
`ctx.*` call. Operand types are read from the forward's annotations and `ctx.numbers`.

`count_kernels` counts at run time instead: the non-view aten operators one forward and
backward dispatches, for any eager alternative (not for compiled ones).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


@dataclass(frozen=True)
class OpCounts:
    """Tensor operations in the generated forward and in the whole backward (all guards)."""

    forward: int
    backward: int

    @property
    def ratio(self) -> float:
        """Backward ops per forward op: reverse mode's cheap-gradient bound is 4."""
        return self.backward / self.forward if self.forward else float("nan")


def count_ops(source: str) -> OpCounts:
    """Count the operations of the autograd.Function defined in `source`."""
    methods = _function_methods(ast.parse(source))
    numbers = _number_names(methods["forward"], methods["backward"])
    return OpCounts(
        forward=_count(methods["forward"], numbers),
        backward=_count(methods["backward"], numbers),
    )


def _function_methods(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """The forward and backward methods of the first class that defines both."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
            if "forward" in methods and "backward" in methods:
                return methods
    raise ValueError("no class with forward and backward methods in the source")


def _number_names(forward: ast.FunctionDef, backward: ast.FunctionDef) -> set[str]:
    """Names bound to Python numbers: non-tensor forward arguments and `ctx.numbers`."""
    names = {
        arg.arg
        for arg in forward.args.args
        if arg.annotation is not None and "Tensor" not in ast.unparse(arg.annotation)
    }
    for node in ast.walk(backward):
        if isinstance(node, ast.Assign) and ast.unparse(node.value) == "ctx.numbers":
            names.update(n.id for n in ast.walk(node.targets[0]) if isinstance(n, ast.Name))
    return names


def _count(function: ast.FunctionDef, numbers: set[str]) -> int:
    """Tensor operations anywhere in `function`'s body (not in its annotations)."""
    nodes = (node for statement in function.body for node in ast.walk(statement))
    return sum(_is_tensor_op(node, numbers) for node in nodes)


def _is_tensor_op(node: ast.AST, numbers: set[str]) -> bool:
    """Whether `node` is one tensor operation (see the module docstring)."""
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        return not (name.startswith(("ctx.", "math.")) or isinstance(node.func, ast.Name))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return not _is_number(node, numbers)
    return False


def _is_number(node: ast.AST, numbers: set[str]) -> bool:
    """Whether `node` is a Python number: constants, number names and arithmetic on them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in numbers
    if isinstance(node, ast.BinOp):
        return _is_number(node.left, numbers) and _is_number(node.right, numbers)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand, numbers)
    if isinstance(node, ast.Call):
        return ast.unparse(node.func).startswith("math.")
    return False


class _KernelCounter(TorchDispatchMode):
    """Count the non-view aten operators dispatched while active."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += not func.is_view
        return func(*args, **(kwargs or {}))


def count_kernels(
    fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...], grad: torch.Tensor
) -> int:
    """Non-view aten operators that one forward and backward of `fn` dispatch."""
    wanted = tuple(t for t in inputs if t.requires_grad)
    counter = _KernelCounter()
    with counter:
        torch.autograd.grad(fn(*inputs), wanted, grad)
    return counter.count
