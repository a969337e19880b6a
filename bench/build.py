"""Generate a case's Function with symgrad at run time and import it the way user code would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import symgrad
from bench.cases import Fn
from bench.opcount import OpCounts, count_ops

# Note [fused hook]
# The spec line that asks symgrad for its fused mode (`mode: fused`: forward and backward
# each compiled once with torch.compile). The bench's "fused" column appends it to a
# case's spec and times that Function, called eagerly; a spec the generator refuses in
# fused mode leaves the column empty.
FUSED_SPEC_LINE = "mode: fused"


class UnsupportedSpecError(Exception):
    """symgrad refuses the spec (a SpecError): the case is reported, not timed."""


@dataclass(frozen=True)
class Generated:
    """A generated module's convenience function, its source and the time symgrad took."""

    function: Fn
    source: str
    # Seconds for symgrad.load_spec plus symgrad.generate (parse, derive, render).
    seconds: float
    ops: OpCounts


def generate_case(spec_path: Path, workdir: Path, suffix: str = "") -> Generated:
    """Generate and import the Function of `spec_path`; time symgrad's part."""
    start = time.perf_counter()
    try:
        files = symgrad.generate(symgrad.load_spec(spec_path))
    except symgrad.InternalError:
        raise  # a bug, not a refusal: the run stops and says so
    except symgrad.SpecError as error:
        raise UnsupportedSpecError(str(error)) from None
    seconds = time.perf_counter() - start
    filename = next(name for name in files if not name.startswith("test_"))
    source = files[filename]
    stem = filename.removesuffix(".py")
    module = import_source(f"bench_generated_{stem}{suffix}", source, workdir)
    return Generated(getattr(module, stem), source, seconds, count_ops(source))


def _with_fused_mode(spec_path: Path, workdir: Path) -> Path:
    """A copy of the spec in `workdir` that asks for fused mode (Note [fused hook])."""
    fused_spec = workdir / f"{spec_path.stem}_fused.yaml"
    text = spec_path.read_text(encoding="utf-8").rstrip("\n")
    fused_spec.write_text(f"{text}\n{FUSED_SPEC_LINE}\n", encoding="utf-8")
    return fused_spec


def _renamed(spec_path: Path) -> Path:
    """The spec with `Fused` appended to its name (and `_fused` to a module it names): its
    C++ operator then has a namespace of its own beside the eager-mode build's."""
    lines = spec_path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        if line.startswith("name: "):
            lines[n] = line.rstrip() + "Fused"
        elif line.startswith("module: "):
            lines[n] = line.rstrip() + "_fused"
    spec_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec_path


def generate_fused(spec_path: Path, workdir: Path) -> Generated | None:
    """The spec's Function in symgrad's fused mode, or None where symgrad refuses it."""
    fused_spec = _with_fused_mode(spec_path, workdir)
    try:
        return generate_case(fused_spec, workdir, suffix="_fused")
    except UnsupportedSpecError:
        return None


@dataclass(frozen=True)
class BuiltCpp:
    """The C++ target's function for a case, and what building it took."""

    function: Fn
    # Seconds to generate, then to compile and load (first build), then to load again.
    generate_seconds: float
    build_seconds: float
    load_seconds: float


def generate_cpp(spec_path: Path, workdir: Path, fused: bool = False) -> BuiltCpp | None:
    """The spec's C++ Function (symgrad gen --target cpp), built and loaded, or None where
    symgrad refuses it. With `fused`, in fused mode (its CPU loops), and None where the
    spec has none. The build goes to a cache folder in `workdir`. An internal error is
    raised, not taken for a refusal: a column silently empty would hide a bug."""
    start = time.perf_counter()
    if fused:
        spec_path = _renamed(_with_fused_mode(spec_path, workdir))
    try:
        files = symgrad.generate(symgrad.load_spec(spec_path), "cpp")
    except symgrad.InternalError:
        raise
    except symgrad.SpecError:
        return None
    if fused and not any("forward_loop" in text for text in files.values()):
        return None
    generated = time.perf_counter()
    folder = workdir / ("cpp_fused" if fused else "cpp")
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    loader = next(n for n in files if n.endswith(".py") and not n.startswith("test_"))
    stem = loader.removesuffix(".py")
    os.environ.setdefault("SYMGRAD_CPP_CACHE", str(workdir / "cpp_cache"))
    module = import_source(f"bench_cpp{'_fused' if fused else ''}_{stem}", files[loader], folder)
    built = time.perf_counter() - generated
    load = cached_load_seconds(Path(str(module.__file__)))
    return BuiltCpp(getattr(module, stem), generated - start, built, load)


# Run by cached_load_seconds in a fresh interpreter: import the loader at argv[1], timed.
_LOAD_AGAIN = """
import importlib.util, sys, time
import torch
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("symgrad_bench_loader", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(time.perf_counter() - start)
"""


def cached_load_seconds(loader: Path) -> float:
    """Seconds to import the generated loader again in a fresh process, its build cached.

    In the benchmark's process a second import would measure nothing: the loader skips
    the load once its operator is registered, and torch.utils.cpp_extension remembers
    what it built. A new interpreter (same environment, so the same SYMGRAD_CPP_CACHE)
    imports torch, then is timed importing the loader: torch.utils.cpp_extension's
    import, ninja finding the build up to date, loading the library and registering the
    operator, what a user's process pays each time once the build is cached.
    """
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AGAIN, str(loader)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loading {loader} again failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def import_source(name: str, source: str, workdir: Path) -> ModuleType:
    """Write `source` to workdir and import it as `name`, registered in sys.modules.

    torch.compile needs the module registered: it looks functions' globals up by module.
    """
    path = workdir / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
