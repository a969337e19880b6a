"""`python -m bench`: run the benchmark suite."""

from bench.cli import main

raise SystemExit(main())
