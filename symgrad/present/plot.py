"""Draw a spec's outputs and partial derivatives over its inputs' domains (`show --plot`).

One row per differentiable tensor input, swept over its test domain while the other
inputs stay at the middle of theirs; one column per output's value and per output's
partial derivative along the swept input. The generated Function (solid) is drawn over
autograd of the plain formula (dashed), both from the generated module and its test's
`reference`, so kinks, surrogate gradients and overflow show at a glance.
"""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from symgrad.api import generate
from symgrad.errors import Location, SpecError
from symgrad.frontend.domains import default_domain
from symgrad.frontend.model import Input, InputType, Spec
from symgrad.frontend.options import option_inputs
from symgrad.language import reductions

# Points along each swept input.
_POINTS = 401


def plot(spec: Spec, path: str | Path) -> Path:
    """Draw `spec` into the PNG at `path` and return the path."""
    chosen = option_inputs(spec)
    if chosen:
        message = "--plot draws a spec without options; this one has a formula per option"
        raise SpecError(chosen[0].location, message, f"inputs.{chosen[0].name}")
    pyplot = _pyplot()
    _refuse_reductions(spec)
    function, reference = _load(spec)
    swept = [i for i in spec.differentiable_inputs if i.is_tensor]
    if not swept:
        raise SpecError(Location(spec.source), "--plot needs a differentiable tensor input")
    columns = [(o.name, False) for o in spec.outputs]
    columns += [(o.name, True) for o in spec.outputs if o.differentiable]
    figure, axes = pyplot.subplots(
        len(swept), len(columns), figsize=(3.2 * len(columns), 2.6 * len(swept)), squeeze=False
    )
    for row, item in enumerate(swept):
        grid, ours = _sweep(spec, item, function)
        _, theirs = _sweep(spec, item, reference)
        held = held_inputs(spec, item)
        for column, key in enumerate(columns):
            axis = axes[row][column]
            output, is_partial = key
            axis.plot(grid, ours[key], label="symgrad", linewidth=2)
            axis.plot(grid, theirs[key], "--", label="autograd", linewidth=1.2)
            title = f"d{output}/d{item.name}" if is_partial else output
            axis.set_title(wrap(title, 3.2), fontsize=10)
            axis.set_xlabel(wrap(f"{item.name}{held}", 3.2), fontsize=8)
            axis.grid(alpha=0.3)
    axes[0][0].legend()
    figure.suptitle(wrap(f"{spec.name} ({spec.source})", 3.2 * len(columns)))
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path


def held_inputs(spec: Spec, swept: Input) -> str:
    """What the other inputs are held at while `swept` varies: " (w = 0.0, s = 1.0)"."""
    others = []
    for item in spec.inputs:
        if item is not swept:
            tensor_or_default = item.is_tensor or item.default is None
            value = _middle(item) if tensor_or_default else item.default
            others.append(
                f"{item.name} = {value:g}" if isinstance(value, float) else f"{item.name} = {value}"
            )
    return f" ({', '.join(others)})" if others else ""


# About how many characters of a title fit in an inch of the figure.
_CHARACTERS_PER_INCH = 11


def wrap(text: str, inches: float) -> str:
    """`text` broken into lines that fit a panel (or the figure) `inches` wide."""
    width = max(10, int(inches * _CHARACTERS_PER_INCH))
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise SpecError(
            Location("<plot>"),
            "--plot needs matplotlib, which is not installed here: install it into"
            " symgrad's environment (`.venv/bin/python -m pip install matplotlib` where"
            " scripts/setup.sh made it, or `pip install 'symgrad[plot]'`)",
        ) from None
    return pyplot


def _refuse_reductions(spec: Spec) -> None:
    """A sweep draws elementwise functions; a reduction mixes the points of the sweep."""
    kinds = (reductions.Reduction, reductions.Normalization)
    named = [(i.expr, i.location) for i in spec.intermediates]
    named += [(o.expr, o.location) for o in spec.outputs]
    for expr, location in named:
        if expr.has(*kinds):
            raise SpecError(location, "--plot draws elementwise specs; this one reduces")


def _load(spec: Spec) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The generated function and the plain formula of the generated test."""
    files = generate(spec)
    module = types.ModuleType(spec.module)
    exec(compile(files[f"{spec.module}.py"], f"<symgrad {spec.module}>", "exec"), module.__dict__)
    previous = sys.modules.get(spec.module)
    sys.modules[spec.module] = module  # the test imports it by name
    try:
        test: dict[str, Any] = {"__name__": f"test_{spec.module}", "__package__": ""}
        source = files[f"test_{spec.module}.py"]
        exec(compile(source, f"<symgrad test_{spec.module}>", "exec"), test)
    finally:
        if previous is None:
            del sys.modules[spec.module]
        else:
            sys.modules[spec.module] = previous
    return getattr(module, spec.module), test["reference"]


def _sweep(
    spec: Spec, swept: Input, function: Callable[..., Any]
) -> tuple[list[float], dict[tuple[str, bool], list[float]]]:
    """Values and partials of each output along `swept`, the other inputs held fixed."""
    low, high = default_domain(swept)
    grid = torch.linspace(low, high, _POINTS, dtype=torch.float64)
    arguments = [_argument(item, grid if item is swept else None) for item in spec.inputs]
    outputs = function(*arguments)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    index = spec.inputs.index(swept)
    curves: dict[tuple[str, bool], list[float]] = {}
    for output, value in zip(spec.outputs, outputs, strict=False):
        value = value.expand_as(grid)
        curves[(output.name, False)] = value.detach().tolist()
        if output.differentiable:
            (partial,) = torch.autograd.grad(
                value.sum(), arguments[index], allow_unused=True, retain_graph=True
            )
            partial = torch.zeros_like(grid) if partial is None else partial
            curves[(output.name, True)] = partial.tolist()
    return grid.tolist(), curves


def _argument(item: Input, grid: torch.Tensor | None) -> Any:
    """An input's value: the sweep, the middle of its domain, or its number."""
    if not item.is_tensor:
        return item.default if item.default is not None else _middle(item)
    value = grid.clone() if grid is not None else torch.tensor(_middle(item), dtype=torch.float64)
    return value.requires_grad_(item.differentiable)


def _middle(item: Input) -> Any:
    """The middle of the input's domain, as a value of its type."""
    low, high = default_domain(item)
    middle = (low + high) / 2
    return {InputType.INT: round(middle), InputType.BOOL: True}.get(item.type, middle)
