"""``python -m pytest_ragev.cli``: the ``ragev`` command."""

from __future__ import annotations

import sys

from pytest_ragev.cli import main

sys.exit(main())
