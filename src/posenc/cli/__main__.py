"""``python -m posenc.cli``."""

import sys

from . import main

sys.exit(main())
