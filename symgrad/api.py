"""The Python API: load a spec, generate sources in memory, write them to disk."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import symgrad
from symgrad.derive import derive
from symgrad.errors import Location, SpecError
from symgrad.loader import load_yaml
from symgrad.model import Spec
from symgrad.parse import node_from_data, parse_spec
from symgrad.render import render
from symgrad.write import write_files

__all__ = ["generate", "load_spec", "spec_from_dict", "write_files"]


def display_path(path: Path) -> str:
    """`path` relative to the working directory, with forward slashes (never absolute)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        relative = path.name
    return Path(relative).as_posix()


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate the YAML spec at `path`."""
    path = Path(path)
    source = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(Location(source), f"cannot read the spec: {error}") from None
    return parse_spec(load_yaml(text, source), source)


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Spec:
    """Validate a spec given as Python data; expressions may be strings or sympy objects."""
    return parse_spec(node_from_data(data, source), source)


def generate(spec: Spec) -> dict[str, str]:
    """Generate the module and its test for `spec`: file name -> source text."""
    return render(derive(spec), symgrad.__version__).by_filename()
