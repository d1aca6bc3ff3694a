"""``python -m fedbound``: the ``fedbound`` command."""

import sys

from fedbound.verify.cli import main

sys.exit(main())
