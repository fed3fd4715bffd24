"""`python -m rofmd` is the `rofmd` command."""

import sys

from rofmd.cli import main

sys.exit(main())
