"""Every function name the language accepts, and the nearest ones to a misspelling."""

from __future__ import annotations

import difflib

from symgrad.language import (
    activations,
    arg_extrema,
    contractions,
    dtypes,
    functions,
    indexing,
    layer_norms,
    piecewise,
    reductions,
    scans,
    segment_extrema,
    segments,
    views,
)


def function_names() -> list[str]:
    """Every function spelling the language accepts."""
    return [
        *functions.SPELLINGS,
        *piecewise.CONDITIONAL_FUNCTIONS,
        *piecewise.CONDITIONAL_ALIASES,
        *reductions.REDUCTIONS,
        *reductions.NORMALIZATIONS,
        layer_norms.LAYER_NORM,
        *indexing.GATHER_SPELLINGS,
        *views.VIEW_SPELLINGS,
        *scans.SCANS,
        *scans.POSITION_SPELLINGS,
        *contractions.CONTRACTION_SPELLINGS,
        segments.SEGMENT_SUM,
        segments.INDEX_SELECT,
        segment_extrema.SEGMENT_AMAX,
        dtypes.FINFO_EPS,
        *arg_extrema.ARG_EXTREMA,
        *activations.ACTIVATIONS,
        *activations.ACTIVATION_ALIASES,
        "Piecewise",
    ]


def nearest_functions(name: str) -> list[str]:
    """The spellings nearest `name`, one per function (not sigmoid's aliases next to it)."""
    aliases = {
        **functions.SPELLINGS,
        **piecewise.CONDITIONAL_ALIASES,
        **activations.ACTIVATION_ALIASES,
    }
    nearest = difflib.get_close_matches(name, function_names(), n=12)
    by_function = {aliases.get(spelling, spelling): spelling for spelling in reversed(nearest)}
    return list(by_function.values())


def is_function_name(name: str) -> bool:
    return name in function_names()
