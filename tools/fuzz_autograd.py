"""Fuzz symgrad against autograd at scale: `python tools/fuzz_autograd.py --specs 10000`.

Runs seeds start .. start+specs-1 of tests/fuzz_specs.py in worker processes, prints a
summary (counts by check and by first error line) and writes each failing spec, with
its failure, to --out.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz_specs import check_case, random_case


def run(seed: int) -> tuple[int, str | None]:
    """One seed's outcome, in a worker."""
    import torch

    torch.set_num_threads(1)
    try:
        case = random_case(seed)
    except Exception as error:  # a bug of the fuzz itself: reported, not fatal
        return seed, f"draw: {type(error).__name__}: {error}"
    return seed, check_case(case)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--specs", type=int, default=1000, help="how many seeds (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=Path("build/fuzz"), help="failing specs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    failures: dict[int, str] = {}
    seeds = range(args.start, args.start + args.specs)
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs) as pool:
        for done, (seed, failure) in enumerate(pool.imap_unordered(run, seeds, chunksize=8), 1):
            if failure is not None:
                failures[seed] = failure
                text = f"# {failure}\n" + (
                    random_case(seed).yaml() if "draw:" not in failure else ""
                )
                (args.out / f"seed_{seed}.yaml").write_text(text, encoding="utf-8")
            if done % 500 == 0:
                print(f"{done} specs, {len(failures)} failures", file=sys.stderr, flush=True)
    kinds = collections.Counter(f.splitlines()[0].split(":")[0] for f in failures.values())
    firsts = collections.Counter(f.splitlines()[0][:100] for f in failures.values())
    seconds = time.perf_counter() - began
    print(
        f"{args.specs} specs (seeds {args.start}..{args.start + args.specs - 1}) in {seconds:.0f} s"
    )
    print(f"{len(failures)} failures" + ("" if not failures else f", written to {args.out}/"))
    for kind, count in kinds.most_common():
        print(f"  {count:5d} {kind}")
    for first, count in firsts.most_common(10):
        print(f"  {count:5d} x {first}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
