"""symgrad at the edges: `python tools/extreme_values.py [--subset] [--only NAME]`.

Checks every example, every language function (as a one-line spec) and the idioms of
issue 28 in float32 at ±100, ±30, ±10, ±1, ±1e-4, 0 and ±1e-30 (near the ends of declared
domains too), against torch's float32 built-in where one exists and float64 always
(tests/extreme_suite.py says the criterion). Prints one table row per failure: subject,
point, output or gradient, got, reference, bound; exits 1 when any failure is not a
documented exception (tests/extreme_subjects.py: EXCEPTIONS, and KNOWN_FAILING for
failures being fixed).
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.extreme_subjects import KNOWN_FAILING, SUBSET, all_subjects, excepted
from tests.extreme_suite import Failure, check_subject, format_failures


def _selected(names: list[str], subset: bool, only: list[str]) -> list[str]:
    """The subjects to run: all, CI's subset, or those matching --only (a name, its part
    after the slash, or an fnmatch pattern)."""
    if subset:
        names = [n for n in names if n in SUBSET]
    if only:
        names = [
            n
            for n in names
            if any(fnmatch.fnmatchcase(n, o) or n.split("/", 1)[1] == o for o in only)
        ]
    return names


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--subset", action="store_true", help="only the subjects CI runs")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="a subject (softmax, example/softmax, 'idiom/*'); repeatable",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=200,
        help="point combinations per subject before sampling (default 200)",
    )
    parser.add_argument(
        "--rows", type=int, default=20, help="failures printed per subject (default 20; 0: all)"
    )
    args = parser.parse_args()
    subjects = all_subjects()
    names = _selected(list(subjects), args.subset, args.only)
    if not names:
        print(f"no subject matches {args.only}; subjects: {', '.join(subjects)}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    failing: dict[str, list[Failure]] = {}
    judged_total = 0
    for name in names:
        judged, found = check_subject(subjects[name], args.limit)
        judged_total += judged
        found = [f for f in found if excepted(f) is None]
        if found:
            failing[name] = found
            note = f"  (known: {KNOWN_FAILING[name]})" if name in KNOWN_FAILING else ""
            print(f"\n{name}: {len(found)} failures{note}")
            print(format_failures(found[: args.rows or None]))
    seconds = time.perf_counter() - began
    print(
        f"\n{len(names)} subjects, {judged_total} values and gradients judged in {seconds:.0f} s:"
        f" {len(failing)} failing ({sum(n in KNOWN_FAILING for n in failing)} known)"
    )
    stale = [n for n in names if n in KNOWN_FAILING and n not in failing]
    if stale:
        print(f"passing, but listed in KNOWN_FAILING: {', '.join(stale)}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
