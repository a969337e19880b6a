"""symgrad's architecture from its source: modules, their jobs, sizes and import graph.

`python tools/architecture.py` prints the module table of CONTRIBUTING.md: each module's
job is the first line of its docstring (`--sizes` adds line counts). `--graph` prints
the import graph, type-only and function-level imports included, and its cycles.
tests/test_architecture.py holds the code to these: no cycle, no module over MAX_LINES,
the table current.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "symgrad"
MAX_LINES = 450


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The symgrad modules `path` imports, anywhere in it (type-only and local imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("symgrad"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("symgrad")}
    return found & known


def graph() -> dict[str, list[str]]:
    """Module -> the symgrad modules it imports, sorted."""
    known = modules()
    return {name: sorted(imports(path, set(known)) - {name}) for name, path in known.items()}


def cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def job(path: Path) -> str:
    """The first line of the module's docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def table(sizes: bool = False) -> str:
    """The Markdown table of modules and their jobs (and line counts, with `sizes`)."""
    rows = ["| module | lines | its one job |" if sizes else "| module | its one job |"]
    rows.append("| --- | ---: | --- |" if sizes else "| --- | --- |")
    for path in modules().values():
        if path.name == "__init__.py" and line_count(path) < 5:
            continue  # a package that only names itself
        shown = f"`{path.relative_to(ROOT).as_posix()}`"
        count = f" {line_count(path)} |" if sizes else ""
        rows.append(f"| {shown} |{count} {job(path).replace('|', '/')} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print the import graph")
    parser.add_argument("--sizes", action="store_true", help="add line counts to the table")
    args = parser.parse_args()
    if not args.graph:
        print(table(args.sizes))
        return
    edges = graph()
    for name, targets in edges.items():
        short = [t.removeprefix("symgrad.") for t in targets]
        print(f"{name.removeprefix('symgrad.') or 'symgrad'} -> {', '.join(short) or '-'}")
    print(f"cycles: {cycles(edges) or 'none'}")


if __name__ == "__main__":
    main()
