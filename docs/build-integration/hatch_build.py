"""A hatch build hook that regenerates symgrad's modules before each build.

Copy this file beside your pyproject.toml and add:

    [tool.hatch.build.hooks.custom]
    dependencies = ["symgrad"]        # to build only: generated code needs nothing but torch
    specs = "specs"                   # the folder of *.yaml specs (default: specs)
    output = "src/mypkg/generated"    # where the modules go (default: generated)

The hook writes only files whose content changed, and adds the generated files to the
build even where .gitignore excludes them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

import symgrad


class SymgradBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Generate every spec's module and test into the package before hatch collects files."""

    PLUGIN_NAME = "symgrad"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Regenerate the modules, then make sure the build includes them."""
        specs = str(self.config.get("specs", "specs"))
        output = str(self.config.get("output", "generated"))
        # From the project root, so each file's header names its spec, and the command
        # that writes it again, as `symgrad gen` run there would.
        with _working_directory(self.root):
            files = _generate_all(Path(specs), output)
            for changed in symgrad.write_files(files, output):
                self.app.display_info(f"symgrad: wrote {changed.as_posix()}")
        build_data["artifacts"] += [f"{Path(output).as_posix()}/{name}" for name in files]


def _generate_all(specs: Path, output: str) -> dict[str, str]:
    """Every file the specs below `specs` generate for `output`; refuse two specs writing
    one module."""
    files: dict[str, str] = {}
    for path in sorted(p for p in specs.rglob("*") if p.suffix in (".yaml", ".yml")):
        generated = symgrad.generate(symgrad.load_spec(path), output=output)
        if files.keys() & generated.keys():
            raise RuntimeError(f"{path.as_posix()} writes a module another spec writes too")
        files.update(generated)
    return files


@contextlib.contextmanager
def _working_directory(path: str | os.PathLike[str]) -> Iterator[None]:
    """Run the block in `path` (contextlib.chdir, which needs Python 3.11)."""
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)
