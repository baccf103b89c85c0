"""`python -m app`: the `codexr` console script (app/launch.py)."""

import sys

from .launch import main

sys.exit(main())
