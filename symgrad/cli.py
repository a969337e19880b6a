"""The `symgrad` command line: argument parsing and exit codes, no logic of its own.

Exit status: 0 success, 1 a spec is invalid, 2 a usage error (as black uses them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import symgrad
from symgrad.api import generate, load_spec
from symgrad.errors import Location, SpecError
from symgrad.write import write_files

DEFAULT_OUTPUT_DIRECTORY = "generated"
_SPEC_SUFFIXES = (".yaml", ".yml")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symgrad",
        description="Generate torch.autograd.Functions, backward included, from formulas.",
    )
    parser.add_argument("--version", action="version", version=f"symgrad {symgrad.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    gen = commands.add_parser(
        "gen",
        help="generate a module and its test for each spec",
        description="Write DIR/<module>.py and DIR/test_<module>.py for each spec. "
        "Nothing is written unless every spec is valid.",
    )
    gen.add_argument("specs", nargs="+", metavar="SPEC", help="spec files or folders of *.yaml")
    gen.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT_DIRECTORY,
        metavar="DIR",
        help=f"output folder, created if missing (default: {DEFAULT_OUTPUT_DIRECTORY}/)",
    )
    gen.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        paths = _spec_paths(args.specs)
    except FileNotFoundError as error:
        print(f"symgrad: error: {error}", file=sys.stderr)
        return 2
    return _generate(paths, Path(args.output), args.quiet)


def _spec_paths(arguments: Sequence[str]) -> list[Path]:
    """Expand folders into the spec files below them, in a stable order."""
    paths: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            paths += sorted(p for p in path.rglob("*") if p.suffix in _SPEC_SUFFIXES)
        elif path.exists():
            paths.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {argument}")
    return paths


def _generate(paths: Sequence[Path], output: Path, quiet: bool) -> int:
    files: dict[str, str] = {}
    origin: dict[str, str] = {}
    failed = False
    for path in paths:
        try:
            spec = load_spec(path)
            for name, text in generate(spec).items():
                if name in origin:
                    raise SpecError(
                        Location(spec.source),
                        f"writes {name}, which {origin[name]} writes too; set a distinct module",
                    )
                files[name] = text
                origin[name] = spec.source
        except SpecError as error:
            print(error, file=sys.stderr)
            failed = True
    if failed:
        return 1
    changed = write_files(files, output)
    if not quiet:
        for name in files:
            status = "wrote" if output / name in changed else "unchanged"
            print(f"{status} {output / name}")
    return 0
