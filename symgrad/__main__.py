"""`python -m symgrad`: the command line."""

import sys

from symgrad.cli import main

sys.exit(main())
