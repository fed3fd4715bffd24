"""`python -m rofmd` is the `rofmd` command."""

import sys

from rofmd.cli.main import main

sys.exit(main())
