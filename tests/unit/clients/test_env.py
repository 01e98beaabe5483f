"""``clients._env``: ``${VAR}`` headers, expanded at call time and held as secrets."""

from __future__ import annotations

import pytest

from pytest_ragev.clients import _env
from pytest_ragev.clients._env import unset_references

CANARY = "sk-CANARY-7f3a9c"


def test_secret_repr_is_redacted_but_its_value_is_sent() -> None:
    secret = _env.Secret(f"Bearer {CANARY}")
    assert repr(secret) == "'***'" and repr({"Authorization": secret}) == "{'Authorization': '***'}"
    assert str(secret) == f"Bearer {CANARY}" and f"{secret}" == f"Bearer {CANARY}"
    assert secret.encode("latin-1") == f"Bearer {CANARY}".encode()


def test_expanded_headers_hold_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", CANARY)
    headers, secrets = _env.expand_headers(
        {"X-Token": "${MY_TOKEN}", "Api-Key": "literal-key", "X-Team": "qa"}, where="[pipeline]"
    )
    assert headers == {"X-Token": CANARY, "Api-Key": "literal-key", "X-Team": "qa"}
    assert CANARY not in repr(headers) and "literal-key" not in repr(headers)
    assert "'qa'" in repr(headers)
    assert sorted(secrets) == sorted([CANARY, "literal-key"]) and CANARY not in repr(secrets)


def test_header_snapshot_follows_the_settings_secret_rules() -> None:
    """Templates are recorded as written; a literal credential never is."""
    snapshot = _env.snapshot_headers({
        "Authorization": "Bearer ${RAG_TOKEN}",
        "Proxy-Authorization": f"Bearer {CANARY} ${{X}}",  # a literal beside a reference
        "X-Auth-Token": CANARY,
        "Cookie": f"session={CANARY}",
        "X-Request-Id": "run-17",
        "Content-Type": "application/json",
    })
    assert snapshot == {
        "Authorization": "Bearer ${RAG_TOKEN}",
        "Proxy-Authorization": "***",
        "X-Auth-Token": "***",
        "Cookie": "***",
        "X-Request-Id": "run-17",
        "Content-Type": "application/json",
    }


def test_unset_references_lists_each_missing_variable_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGEV_SET", "x")
    monkeypatch.delenv("RAGEV_GONE_A", raising=False)
    monkeypatch.delenv("RAGEV_GONE_B", raising=False)
    headers = {"A": "Bearer ${RAGEV_GONE_A}", "B": "${RAGEV_SET}-${RAGEV_GONE_B}",
               "C": "${RAGEV_GONE_A}", "D": "literal $NOT_A_REFERENCE"}
    assert unset_references(headers) == ["RAGEV_GONE_A", "RAGEV_GONE_B"]
