"""The cost model: what each torch primitive costs, relative to one multiplication.

The table (costs.json beside this module) is measured by `python -m bench --calibrate`
on the machine the code is generated for (CPU, float32, one thread) and ships with the
package, so generation stays deterministic: one table, one output. It decides which
forward values the backward saves (symgrad.ad.saving), whether an identity pays
(symgrad.ad.cheapen) and whether an activation's CPU form replaces torch's kernel
(symgrad.backends.python.kernels).

Keys are language function and activation names (`exp`, `mish`), torch's backward
kernels (`mish_backward`), CPU forms (`mish.cpu_form`) and arithmetic (`mul`, `add`,
`div`, `square`, `cube`, `pow`, `where`, `addcmul`, `sum`).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import sympy

from symgrad.language import functions, piecewise, reductions, views

# Keys every table must have: the arithmetic the model prices directly.
ARITHMETIC = ("mul", "add", "div", "square", "cube", "pow", "where", "addcmul", "sum")


@dataclass(frozen=True)
class CostTable:
    """Relative costs (one `mul` = 1) and where they were measured."""

    machine: str
    command: str
    relative: Mapping[str, float]

    def of(self, primitive: str) -> float:
        """The cost of `primitive`; a primitive never measured costs the median call."""
        return self.relative.get(primitive, self.median_call)

    @functools.cached_property
    def median_call(self) -> float:
        """The median cost of the calls measured (not arithmetic, not CPU forms)."""
        calls = [v for k, v in self.relative.items() if k not in ARITHMETIC and "." not in k]
        return statistics.median(calls) if calls else 1.0

    def cheaper(self, candidate: str, current: str) -> bool:
        """Whether `candidate` was measured and costs less than `current`."""
        return candidate in self.relative and self.of(candidate) < self.of(current)

    def expression(self, expr: sympy.Basic) -> float:
        """The summed cost of every operation in `expr`, as a tree (shared parts count twice)."""
        return sum(self._node(node) for node in sympy.preorder_traversal(expr))

    def _node(self, node: sympy.Basic) -> float:
        """The cost of the operation at `node` alone."""
        if isinstance(node, sympy.Add):
            return self.of("add") * (len(node.args) - 1)
        if isinstance(node, sympy.Mul):
            # A factor -1 is a subtraction in the sum around it, not a multiplication.
            factors = len(node.args) - (1 if node.args[0] == -1 else 0)
            return self.of("mul") * (factors - 1)
        if isinstance(node, sympy.Pow):
            return self._power(node.exp)
        if isinstance(node, piecewise.Where):
            return self.of("where")
        if isinstance(node, (reductions.Reduction, reductions.Normalization)):
            return self.of(node.name) if node.name in self.relative else self.of("sum")
        if isinstance(node, (functions.ElementwiseFunction, piecewise.Kink)):
            return self.of(getattr(node, "name", type(node).__name__))
        if isinstance(node, views.View):
            return 0.0  # a view reads the same memory: no kernel runs
        if isinstance(node, sympy.Function):
            return 2 * self.of("mul")
        return 0.0

    def _power(self, exponent: sympy.Basic) -> float:
        """x**k as printed: squares and cubes, products up to 64, reciprocals, roots, pow."""
        named = {-1: "div", 2: "square", 3: "cube"}
        if exponent in (sympy.Rational(1, 2), sympy.Rational(-1, 2)):
            return self.of("sqrt" if exponent > 0 else "rsqrt")
        if exponent.is_Integer and int(exponent) in named:
            return self.of(named[int(exponent)])
        if exponent.is_Integer and 4 <= int(exponent) <= 64:
            return self.of("mul") * (int(exponent).bit_length() + bin(int(exponent)).count("1"))
        return self.of("pow")


def parse(text: str) -> CostTable:
    """A table from its JSON text."""
    data = json.loads(text)
    relative = {str(k): float(v) for k, v in data["relative"].items()}
    missing = [key for key in ARITHMETIC if key not in relative]
    if missing:
        raise ValueError(f"the cost table lacks {', '.join(missing)}")
    return CostTable(str(data["machine"]), str(data["command"]), relative)


def dump(table: CostTable) -> str:
    """The table as JSON, keys sorted and costs to two decimals, so diffs stay small."""
    data = {
        "machine": table.machine,
        "command": table.command,
        "relative": {k: round(v, 2) for k, v in sorted(table.relative.items())},
    }
    return json.dumps(data, indent=2) + "\n"


@functools.cache
def table() -> CostTable:
    """The package's table (costs.json beside this module)."""
    return parse(importlib.resources.files("symgrad.ad").joinpath("costs.json").read_text())
