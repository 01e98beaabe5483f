"""The pip command a message prints for a missing extra, from where pip installed us."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core import install


class _Dist:
    def __init__(self, record: Any) -> None:
        self.record = record

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.record is None else json.dumps(self.record)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(record: Any) -> None:
        # A build's egg-info (no record) before the installed dist-info, as in a clone.
        dists = [_Dist(None), _Dist(record)]
        monkeypatch.setattr(install.metadata, "distributions", lambda name: iter(dists))
        install._source.cache_clear()

    yield use
    install._source.cache_clear()


@pytest.mark.parametrize(
    ("record", "command"),
    [
        ({"url": "file:///home/li/pytest-ragev", "dir_info": {"editable": True}},
         "pip install -e '/home/li/pytest-ragev[vectors]'"),
        ({"url": "file:///srv/ci/clone", "dir_info": {}},
         "pip install '/srv/ci/clone[vectors]'"),
        # A folder with a space and a non-ASCII name, as pip records it (percent-encoded).
        ({"url": "file:///home/M%C3%BCller/my%20clone", "dir_info": {"editable": False}},
         "pip install '/home/Müller/my clone[vectors]'"),
        # A wheel or sdist file, a VCS URL, an index install: the index name.
        ({"url": "file:///tmp/pytest_ragev-0.2.0-py3-none-any.whl", "archive_info": {}},
         "pip install 'pytest-ragev[vectors]'"),
        ({"url": "https://github.com/x/pytest-ragev", "vcs_info": {"vcs": "git"}},
         "pip install 'pytest-ragev[vectors]'"),
        (None, "pip install 'pytest-ragev[vectors]'"),
    ],
    ids=["editable clone", "clone", "quoted path", "wheel", "vcs", "index"],
)
def test_the_command_names_where_pip_installed_us(installed: Any, record: Any,
                                                   command: str) -> None:
    installed(record)
    assert install.install_command("vectors") == command


def test_reinstall_and_a_package_pip_does_not_know(
    installed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed({"url": "file:///c", "dir_info": {"editable": True}})
    assert install.install_command("ja", reinstall=True) == (
        "pip install --force-reinstall -e '/c[ja]'")

    monkeypatch.setattr(install.metadata, "distributions", lambda name: iter(()))
    install._source.cache_clear()
    assert install.install_command("server") == "pip install 'pytest-ragev[server]'"


def test_this_checkout_gets_a_command_that_names_it() -> None:
    # The suite runs from an install of this checkout (CI: pip install -e .): the
    # command names its folder, not an index that does not serve the package yet.
    install._source.cache_clear()
    checkout = Path(__file__).resolve().parents[3]
    assert install.install_command("vectors") in (
        f"pip install -e '{checkout}[vectors]'", f"pip install '{checkout}[vectors]'")
