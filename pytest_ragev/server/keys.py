"""API keys: how they look, how they are stored, and what each role may do.

A key is ``rgv_<id>_<secret>``: ``id`` (12 hex digits) names the stored record, the
secret is 32 random bytes. Only a salted SHA-256 digest of the secret is stored, and a
presented key is checked by comparing digests in constant time. A slow password hash
(scrypt, bcrypt) protects secrets people choose; a 256-bit random secret cannot be
guessed from its digest, and a fast digest keeps every request cheap.

Roles follow the original: an ``admin`` key with the ``run_evaluations`` or
``full_access`` capability may create and cancel evaluations; ``viewer`` and ``admin``
keys may read. Every key belongs to one tenant and sees only that tenant's tasks.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Literal

ROLES = ("admin", "viewer")
CAPABILITIES = ("none", "run_evaluations", "full_access")
Role = Literal["admin", "viewer"]
Action = Literal["read", "run"]

PREFIX = "rgv"
_KEY = re.compile(r"^rgv_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
#: Compared against when the presented id is unknown, so both paths cost the same.
_DUMMY_SALT = b"\x00" * 16


@dataclass(frozen=True)
class Principal:
    """Who sent a request: the key's id, role, capability and tenant (never the secret)."""

    key_id: str
    role: str
    capability: str
    tenant: int

    def may(self, action: Action) -> bool:
        """Whether this key may ``read`` tasks or ``run`` (create and cancel) them."""
        if action == "read":
            return self.role in ROLES
        return self.role == "admin" and self.capability in ("run_evaluations", "full_access")


@dataclass(frozen=True)
class StoredKey:
    """A key's record as stored: the digest of its secret, never the secret."""

    key_id: str
    salt: bytes
    digest: bytes
    role: str
    capability: str
    tenant: int
    name: str = ""
    revoked: bool = False

    @property
    def principal(self) -> Principal:
        """The :class:`Principal` a request with this key acts as."""
        return Principal(self.key_id, self.role, self.capability, self.tenant)


def digest(salt: bytes, secret: str) -> bytes:
    """The stored digest of ``secret`` under ``salt``."""
    return hashlib.sha256(salt + secret.encode("utf-8")).digest()


def new_key(*, role: str, capability: str, tenant: int, name: str = "") -> tuple[str, StoredKey]:
    """A fresh key: the text to hand out once, and the record to store."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: use one of {', '.join(ROLES)}")
    if capability not in CAPABILITIES:
        raise ValueError(f"capability {capability!r}: use one of {', '.join(CAPABILITIES)}")
    if tenant < 1:
        raise ValueError(f"tenant {tenant}: tenants are numbered from 1")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    stored = StoredKey(key_id, salt, digest(salt, secret), role, capability, tenant, name)
    return f"{PREFIX}_{key_id}_{secret}", stored


def split_key(text: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed key, else ``None``."""
    match = _KEY.match(text.strip())
    return (match.group(1), match.group(2)) if match else None


def verify(stored: StoredKey | None, secret: str) -> bool:
    """Whether ``secret`` is the secret of ``stored`` (constant time; ``None``: never)."""
    salt = stored.salt if stored is not None else _DUMMY_SALT
    expected = stored.digest if stored is not None else b"\x00" * 32
    matches = hmac.compare_digest(digest(salt, secret), expected)
    return matches and stored is not None and not stored.revoked


def key_from_headers(x_api_key: str | None, authorization: str | None) -> str | None:
    """The key a request presents: ``X-API-Key`` (the original's header) or a Bearer token."""
    if x_api_key:
        return x_api_key.strip()
    if authorization:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None
