"""The stash key of the session object, apart so that plugin start-up imports nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_ragev.plugin.session import RagevSession

ragev_session_key: pytest.StashKey[RagevSession] = pytest.StashKey()
