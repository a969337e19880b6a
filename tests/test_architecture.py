"""The architecture holds: no import cycle, no module over the size limit, and the module
table of CONTRIBUTING.md is the one tools/architecture.py writes from the code."""

from __future__ import annotations

from tests.conftest import REPO_ROOT, load_tool

architecture = load_tool("architecture")


def test_no_import_cycles_type_only_and_local_imports_included() -> None:
    assert architecture.cycles(architecture.graph()) == []


def test_no_module_over_the_limit() -> None:
    sizes = {n: architecture.line_count(p) for n, p in architecture.modules().items()}
    assert {n: s for n, s in sizes.items() if s > architecture.MAX_LINES} == {}


def test_every_module_says_its_job() -> None:
    assert [n for n, p in architecture.modules().items() if not architecture.job(p)] == []


def test_data_flows_one_way() -> None:
    """Lower layers never import higher ones: language < frontend < ad < backends < api."""
    layers = ["language", "frontend", "ad", "backends", "present"]
    for name, targets in architecture.graph().items():
        parts = name.split(".")
        if len(parts) < 2 or parts[1] not in layers:
            continue
        rank = layers.index(parts[1])
        for target in targets:
            layer = target.split(".")[1] if target.count(".") else ""
            if layer in layers:
                assert layers.index(layer) <= rank, f"{name} imports {target}"
            else:  # top-level modules: only errors and version are below the layers
                assert (
                    target in {"symgrad.errors", "symgrad.version"} or parts[1] == "present"
                ), f"{name} imports {target}"


def test_contributing_lists_every_module() -> None:
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert (
        architecture.table() in text
    ), "run: python tools/architecture.py, paste into CONTRIBUTING.md"


def test_no_test_file_shares_a_name_with_a_generated_one() -> None:
    """pytest imports test files by basename: tests/test_x.py beside generated/test_x.py
    stops the collection of the whole suite ("import file mismatch")."""
    ours = {path.name for path in (REPO_ROOT / "tests").glob("test_*.py")}
    generated = {path.name for path in (REPO_ROOT / "generated").rglob("test_*.py")}
    assert ours & generated == set()
