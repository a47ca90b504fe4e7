"""`python -m cli`: the same as the `wingsmith` console command."""

import sys

from cli.main import main

sys.exit(main())
