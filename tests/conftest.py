"""Shared fixtures and the `--update-goldens` option."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# Test modules that run whole pipelines, fuzzers or subprocesses: the slow part of the
# suite. `python -m pytest -m "not slow" -n auto` runs the fast part (under a minute); tests
# elsewhere opt in with @pytest.mark.slow.
SLOW_MODULES = {
    "test_bench.py",
    "test_checks.py",
    "test_docs.py",
    "test_ecosystem.py",
    "test_first_contact.py",
    "test_fuzz_autograd.py",
    "test_fuzz_grammar.py",
    "test_generated.py",
    "test_namespace.py",
    "test_opinfo.py",
    "test_packaging.py",
    "test_plot.py",
    "test_properties.py",
}


# Golden files of the backends (tests/test_backends.py) are compared, not collected.
collect_ignore_glob = ["golden/*"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow modules' tests, and the generated ones, `slow`."""
    for item in items:
        path = Path(str(item.fspath))
        if path.name in SLOW_MODULES or path.parent.name == "generated":
            item.add_marker(pytest.mark.slow)


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """A function parameter's id is its name: its repr holds an address that differs from
    one process to the next, and pytest-xdist's workers must collect the same ids."""
    if callable(val) and not isinstance(val, type):
        name = getattr(val, "__name__", None)
        return name if isinstance(name, str) else None
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite generated/ and tests/golden/ instead of comparing",
    )


# The marks of a test module that builds C++ beyond CI's subset: it runs in the C++ slow
# mode only (`SYMGRAD_CPP_TESTS=all`, docs/cpp.md), and where a compiler is present.
CPP_SLOW_MODE = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SYMGRAD_CPP_TESTS") != "all", reason="C++ slow mode only"),
    pytest.mark.skipif(
        shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler"
    ),
]


def as_tuple(value: Any) -> tuple[Any, ...]:
    """A function's outputs as a tuple, for one output or several."""
    return value if isinstance(value, tuple) else (value,)


def import_file(path: Path, name: str) -> ModuleType:
    """Import the file at `path` as module `name`, registered in sys.modules.

    torch.compile and pickle look a Function's module up there, so every test that runs
    generated code imports it this way.
    """
    location = importlib.util.spec_from_file_location(name, path)
    assert location is not None and location.loader is not None
    module = importlib.util.module_from_spec(location)
    sys.modules[name] = module
    location.loader.exec_module(module)
    return module


def load_tool(name: str) -> ModuleType:
    """Import tools/<name>.py, which is not a package, once."""
    key = f"symgrad_tool_{name}"
    if key not in sys.modules:
        import_file(REPO_ROOT / "tools" / f"{name}.py", key)
    return sys.modules[key]


def load_generated(name: str) -> ModuleType:
    """Import generated/<name>.py once."""
    key = f"symgrad_generated_{name}"
    if key not in sys.modules:
        import_file(REPO_ROOT / "generated" / f"{name}.py", key)
    return sys.modules[key]


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture
def repo_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from the repository root, as the README's commands do."""
    monkeypatch.chdir(REPO_ROOT)
    return REPO_ROOT
