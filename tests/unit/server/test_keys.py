"""API keys: shape, salted digests, constant-time checks, and what each role may do."""

from __future__ import annotations

import pytest

from pytest_ragev.server.keys import (
    Principal,
    key_from_headers,
    new_key,
    split_key,
    verify,
)


def test_a_new_key_verifies_and_only_its_digest_is_kept() -> None:
    text, stored = new_key(role="admin", capability="run_evaluations", tenant=3)
    key_id, secret = split_key(text) or ("", "")
    assert key_id == stored.key_id and len(key_id) == 12
    assert secret not in repr(stored) and secret.encode() not in stored.digest
    assert verify(stored, secret)
    assert not verify(stored, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert not verify(None, secret)
    _, other = new_key(role="admin", capability="run_evaluations", tenant=3)
    assert other.salt != stored.salt  # the same secret would hash differently


def test_a_revoked_key_never_verifies() -> None:
    text, stored = new_key(role="viewer", capability="none", tenant=1)
    from dataclasses import replace

    assert not verify(replace(stored, revoked=True), split_key(text)[1])  # type: ignore[index]


@pytest.mark.parametrize("text", ["", "rgv_", "rgv_12345_abc", "xyz_0123456789ab_" + "a" * 43,
                                  "rgv_0123456789AB_" + "a" * 43, "rgv_0123456789ab_短"])
def test_malformed_keys_do_not_split(text: str) -> None:
    assert split_key(text) is None


@pytest.mark.parametrize(
    ("role", "capability", "read", "run"),
    [("viewer", "none", True, False), ("viewer", "full_access", True, False),
     ("admin", "none", True, False), ("admin", "run_evaluations", True, True),
     ("admin", "full_access", True, True)],
)
def test_roles(role: str, capability: str, read: bool, run: bool) -> None:
    who = Principal("k", role, capability, 1)
    assert who.may("read") is read and who.may("run") is run


def test_headers() -> None:
    assert key_from_headers(" k1 ", "Bearer k2") == "k1"
    assert key_from_headers(None, "bearer  k2 ") == "k2"
    assert key_from_headers(None, "Basic abc") is None
    assert key_from_headers(None, None) is None


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="role"):
        new_key(role="root", capability="none", tenant=1)
    with pytest.raises(ValueError, match="tenant"):
        new_key(role="admin", capability="none", tenant=0)
