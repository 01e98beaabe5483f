"""Typed stash keys: where the plugin's objects live on ``pytest.Config``.

Apart from every other module so that they import nothing at run time (the types are
for mypy only), as pytest's own plugins keep their ``StashKey`` at module level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_ragev.plugin.collect import CollectionPlan
    from pytest_ragev.plugin.session import RagevSession

#: The session object of a run with a ragev config.
session_key: pytest.StashKey[RagevSession] = pytest.StashKey()

#: What the collectors and items read: the dataset, the variants, how to answer.
collection_key: pytest.StashKey[Callable[[], CollectionPlan]] = pytest.StashKey()
