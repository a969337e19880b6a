"""Options that select a formula: `reduction == "mean"`, `given(scale)`, a bool flag.

Note [Option conditions]: an option is an input decided in Python, before any tensor is
touched: a string among declared choices, a number that may be left out (None), or a
bool used directly as a condition. Each condition on an option is an `OptionCondition`,
a Boolean placeholder that no later stage ever sees: the spec is specialised once per
combination of option values (symgrad.frontend.options), every placeholder replaced by
true or false and every `where` on it reduced to its taken branch, and each variant is
derived on its own. So the untaken branch costs nothing, is never guarded, and may
differ in shape (reduction `none` keeps the elements, `sum` is 0-d).
"""

from __future__ import annotations

import sympy
from sympy.logic.boolalg import BooleanAtom

from symgrad.language.piecewise import Where


class ChoiceSymbol(sympy.Symbol):
    """The symbol of a string input: only `name == "choice"` may read it."""


class OptionCondition(sympy.Symbol):
    """A condition on an option (Note [Option conditions]), named by what it tests."""


def choice_condition(name: str, choice: str) -> OptionCondition:
    """The placeholder of `name == "choice"` for a string input."""
    return OptionCondition(f"{name} == {choice!r}")


def given_condition(name: str) -> OptionCondition:
    """The placeholder of `given(name)`: an optional number passed, not None."""
    return OptionCondition(f"given({name})")


def flag_condition(name: str) -> OptionCondition:
    """The placeholder of a bool input used directly as a condition."""
    return OptionCondition(name)


def decide(expr: sympy.Basic, values: dict[sympy.Basic, sympy.Basic]) -> sympy.Basic:
    """`expr` with each placeholder replaced by its value and each decided `where` reduced.

    A `where` on a decided condition becomes its taken branch even where the other one
    depends on values (Where keeps both then, for torch.where's broadcast): an option's
    untaken branch is never computed, so it lends no shape.
    """
    if not expr.args:
        return values.get(expr, expr)
    args = [decide(arg, values) for arg in expr.args]
    if isinstance(expr, Where) and isinstance(args[0], BooleanAtom):
        return args[1] if bool(args[0]) else args[2]
    return expr.func(*args) if args != list(expr.args) else expr
