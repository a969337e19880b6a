"""The `symgrad` command line: argument parsing and exit codes, no logic of its own.

Exit status: 0 success, 1 a spec is invalid (or, with --check, a file would change),
2 a usage error (as black uses them).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from symgrad.api import display_path, generate, load_spec
from symgrad.backends import registry
from symgrad.backends.base import BackendUnavailableError
from symgrad.errors import SpecError
from symgrad.frontend.names import snake_case
from symgrad.frontend.starter import starter_spec
from symgrad.present.show import describe
from symgrad.progress import Progress
from symgrad.version import __version__
from symgrad.write import pending_changes, unified_diff, write_files

DEFAULT_OUTPUT_DIRECTORY = "generated"
_SPEC_SUFFIXES = (".yaml", ".yml")


def build_parser() -> argparse.ArgumentParser:
    """The parser of `symgrad gen` and `symgrad show`."""
    parser = argparse.ArgumentParser(
        prog="symgrad",
        description="Generate torch.autograd.Functions, backward included, from formulas.",
    )
    parser.add_argument("--version", action="version", version=f"symgrad {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_gen(commands)
    _add_show(commands)
    _add_new(commands)
    commands.add_parser(
        "targets",
        help="list the backends gen can write for",
        description="List the targets of `symgrad gen --target` and a spec's `target:`.",
    )
    return parser


def _add_gen(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gen = commands.add_parser(
        "gen",
        help="generate a module and its test for each spec",
        description="Write DIR/<module>.py and DIR/test_<module>.py for each spec. "
        "Nothing is written unless every spec is valid.",
    )
    _add_specs(gen)
    gen.add_argument(
        "-o",
        "--output",
        default=DEFAULT_OUTPUT_DIRECTORY,
        metavar="DIR",
        help=f"output folder, created if missing (default: {DEFAULT_OUTPUT_DIRECTORY}/)",
    )
    gen.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list the files that are stale or missing",
    )
    gen.add_argument(
        "--diff", action="store_true", help="write nothing; print a diff of what would change"
    )
    gen.add_argument(
        "-j",
        "--jobs",
        type=_job_count,
        default=1,
        metavar="N",
        help="generate N specs at a time (0: one per CPU; default: 1)",
    )
    gen.add_argument(
        "--target",
        metavar="NAME",
        help="the backend to write for, over each spec's `target:` "
        f"(default: {registry.DEFAULT_TARGET}; `symgrad targets` lists them)",
    )
    gen.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    gen.add_argument(
        "--test",
        action="store_true",
        help="then run the generated tests with pytest (which must be installed)",
    )


def _add_show(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = commands.add_parser(
        "show",
        help="print the forward, the partial derivatives and what the backward saves",
        description="Print each spec's forward and partial derivatives as formulas, and "
        "what its backward saves, to review the mathematics before the code.",
    )
    _add_specs(show)
    show.add_argument("--latex", action="store_true", help="print LaTeX instead of unicode")
    show.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw each output and its partials over the inputs' domains, autograd "
        "overlaid, into PNG (one spec; needs matplotlib: pip install 'symgrad[plot]')",
    )


def _add_new(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    new = commands.add_parser(
        "new",
        help="write a commented starter spec",
        description="Write DIR/<module>.yaml: a small working spec for the class NAME, with "
        "every common key explained, to edit into your own.",
    )
    new.add_argument("name", metavar="NAME", help="the CamelCase class name, e.g. SoftClamp")
    new.add_argument(
        "-o", "--output", default=".", metavar="DIR", help="folder to write into (default: .)"
    )


def _add_specs(command: argparse.ArgumentParser) -> None:
    command.add_argument("specs", nargs="+", metavar="SPEC", help="spec files or folders of *.yaml")


def _job_count(text: str) -> int:
    """`--jobs`: a count of processes, 0 meaning one per CPU."""
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {jobs}")
    return jobs or os.cpu_count() or 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "new":
        return _new(args.name, Path(args.output))
    if args.command == "targets":
        for backend in registry.backends():
            print(f"{backend.name:12} {backend.description}")
        return 0
    if args.command == "gen" and args.target is not None and args.target not in registry.names():
        print(f"symgrad: error: {registry.UnknownTargetError(args.target)}", file=sys.stderr)
        return 2
    try:
        paths = _spec_paths(args.specs)
    except FileNotFoundError as error:
        print(f"symgrad: error: {error}", file=sys.stderr)
        return 2
    if args.command == "show":
        if args.plot and len(paths) != 1:
            print("symgrad: error: --plot draws one spec", file=sys.stderr)
            return 2
        return _show(paths, args.latex, args.plot)
    return _gen(paths, args)


def _new(name: str, folder: Path) -> int:
    """Write the starter spec for `name`; never overwrite a file."""
    try:
        text = starter_spec(name)
    except ValueError as error:
        print(f"symgrad: error: {error}", file=sys.stderr)
        return 2
    path = folder / f"{snake_case(name)}.yaml"
    if path.exists():
        print(f"symgrad: error: {display_path(path)} exists; not overwritten", file=sys.stderr)
        return 1
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {display_path(path)}")
    print(f"next: {invoked_as()} gen {shlex.quote(display_path(path))} -o my_functions --test")
    return 0


def invoked_as() -> str:
    """symgrad's command as the user ran it, for the commands hints print.

    `symgrad` where PATH finds this very program; else the path that was run, such as
    `.venv/bin/symgrad` where scripts/setup.sh installed it and no environment is active;
    `python -m symgrad` (that Python, the same way) when run so; and plain `symgrad` when
    another program calls main().
    """
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    if program.name == "__main__.py" and program.parent.name == "symgrad":
        return f"{_runnable(Path(sys.executable))} -m symgrad"
    if program.stem == "symgrad":
        return _runnable(program)
    return "symgrad"


def _runnable(program: Path) -> str:
    """How to type `program`: its name where PATH finds it, else its path as typed (an
    absolute one relative when it lies below the working directory), shell-quoted."""
    absolute = Path(os.path.abspath(program))
    found = shutil.which(program.name)
    if found is not None and Path(os.path.abspath(found)) == absolute:
        return program.name
    typed = program.as_posix()
    if program.is_absolute() and absolute.is_relative_to(Path.cwd()):
        typed = display_path(absolute)
    return shlex.quote(typed if "/" in typed else f"./{typed}")


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


# symgrad gen


@dataclass(frozen=True)
class _Outcome:
    """What generating one spec gave: its files, or the error to print."""

    # The spec as its header names it (relative to the working directory).
    source: str
    files: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def _generate_one(path: Path, output: Path, target: str | None = None) -> _Outcome:
    """Load and generate one spec; a worker process runs this, so errors come back as text."""
    try:
        spec = load_spec(path)
        return _Outcome(spec.source, generate(spec, target, output=output))
    except SpecError as error:
        return _Outcome(display_path(path), error=str(error))
    except BackendUnavailableError as error:
        return _Outcome(display_path(path), error=f"{display_path(path)}: {error}")


def _gen(paths: Sequence[Path], args: argparse.Namespace) -> int:
    """Generate every spec, then write, check or diff the files as asked."""
    progress = Progress(len(paths), sys.stderr, label="symgrad", enabled=not args.quiet)
    output = Path(args.output)
    with progress:
        outcomes = _run(paths, output, args.jobs, progress.advance, args.target)
    files = _collect(outcomes)
    if files is None:
        return 1
    if args.check or args.diff:
        return _check(files, output, args.check, args.diff, args.quiet)
    status = _write(files, output, args.quiet)
    if args.test:
        tests = [str(output / name) for name in files if name.startswith("test_")]
        return subprocess.run([sys.executable, "-m", "pytest", "-q", *tests]).returncode
    return status


def _run(
    paths: Sequence[Path],
    output: Path,
    jobs: int,
    advance: Callable[[], None],
    target: str | None,
) -> list[_Outcome]:
    """Generate each spec for `output`, `jobs` at a time; the outcomes come back in the
    order of `paths`."""
    if jobs == 1 or len(paths) < 2:
        return [_advanced(_generate_one(path, output, target), advance) for path in paths]
    # Fresh interpreters, never a fork: forking a host that runs threads (torch's, in a
    # notebook or a test session) can deadlock the child. Not a forkserver preloading
    # symgrad either: on Python 3.11 its server imports before it takes the parent's
    # sys.path, so it can load another copy of symgrad (an installed one, not a checkout).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(jobs, len(paths)), mp_context=context) as pool:
        futures = [pool.submit(_generate_one, path, output, target) for path in paths]
        for _ in as_completed(futures):
            advance()
        return [future.result() for future in futures]


def _advanced(outcome: _Outcome, advance: Callable[[], None]) -> _Outcome:
    advance()
    return outcome


def _collect(outcomes: Sequence[_Outcome]) -> dict[str, str] | None:
    """All generated files by name, or None after printing every error in spec order."""
    files: dict[str, str] = {}
    origin: dict[str, str] = {}
    failed = False
    for outcome in outcomes:
        for error in _errors(outcome, origin):
            print(error, file=sys.stderr)
            failed = True
        files.update(outcome.files)
        origin.update(dict.fromkeys(outcome.files, outcome.source))
    return None if failed else files


def _errors(outcome: _Outcome, origin: Mapping[str, str]) -> Iterator[str]:
    """The outcome's own error, or a clash with a file another spec writes."""
    if outcome.error is not None:
        yield outcome.error
    for name in outcome.files:
        if name in origin:
            yield (
                f"{outcome.source}: writes {name}, which {origin[name]} writes too; "
                "set a distinct module"
            )
            return


def _write(files: Mapping[str, str], output: Path, quiet: bool) -> int:
    """Write the files that changed and say what happened to each."""
    changed = write_files(files, output)
    if not quiet:
        for name in files:
            status = "wrote" if output / name in changed else "unchanged"
            print(f"{status} {output / name}")
    return 0


def _check(files: Mapping[str, str], output: Path, check: bool, diff: bool, quiet: bool) -> int:
    """Write nothing: list (and with `diff`, show) the files a write would change.

    The diff goes to stdout, so the list goes to stderr then, keeping stdout a patch.
    """
    changes = pending_changes(files, output)
    if diff:
        sys.stdout.write("".join(unified_diff(c, display_path(c.path)) for c in changes))
    if not quiet:
        report = sys.stderr if diff else sys.stdout
        for change in changes:
            print(f"would {change.verb} {change.path}", file=report)
        if not changes:
            print(f"{len(files)} generated files are up to date in {output}", file=report)
    return 1 if check and changes else 0


# symgrad show


def _show(paths: Sequence[Path], latex: bool, plot_path: str | None) -> int:
    """Print the mathematics of each valid spec (and draw it); errors go to stderr."""
    width = shutil.get_terminal_size().columns
    failed = False
    texts = []
    for path in paths:
        try:
            spec = load_spec(path)
            texts.append(describe(spec, latex=latex, width=width))
            if plot_path is not None:
                from symgrad.present.plot import plot  # torch and matplotlib: only when asked

                print(f"drew {plot(spec, plot_path)}", file=sys.stderr)
        except SpecError as error:
            print(error, file=sys.stderr)
            failed = True
    sys.stdout.write("\n".join(texts))
    return 1 if failed else 0
