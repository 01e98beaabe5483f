"""Which keys name a secret, and settings snapshots with every secret hidden."""

from __future__ import annotations

import pytest

from pytest_ragev.core.digest import sha256_json as settings_hash
from pytest_ragev.core.redact import is_reference_only, is_secret_key, redact


def test_redact_hides_secrets_but_not_pointers() -> None:
    snapshot = {
        "chat": {"api_key": "sk-canary", "api_key_env": "OPENAI_API_KEY", "model": "m"},
        "headers": [{"Authorization": "Bearer sk-canary"}],
        "token": "",
    }
    redacted = redact(snapshot)
    assert "sk-canary" not in repr(redacted)
    assert redacted["chat"]["api_key_env"] == "OPENAI_API_KEY"
    assert redacted["chat"]["api_key"] == "***"
    assert redacted["headers"][0]["Authorization"] == "***"
    assert redacted["token"] == ""


@pytest.mark.parametrize(
    "key",
    ["api_key", "apikey", "apiKey", "APIKey", "X-Api-Key", "OPENAI_API_KEY", "private_key",
     "access_key", "secret_key", "key", "token", "access_token", "X-Auth-Token", "authtoken",
     "password", "db_password", "passwd", "passphrase", "secret", "client_secret",
     "credential", "credentials", "Authorization", "Proxy-Authorization", "bearer", "auth",
     "Cookie", "private_key_pem", "access_key_id", "db_pass"],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "canary-value"}) == {key: "***"}


@pytest.mark.parametrize(
    "key",
    ["max_tokens", "maxTokens", "max_token", "tokenize", "jieba_tokenizer", "pad_token",
     "keyword", "keyword_weight", "keyword_threshold", "sort_key", "text_key", "answer_key",
     "api_key_env", "OPENAI_API_KEY_ENV_VAR", "password_file", "auth_url", "chunk_size",
     "model", "passages", "pass_rate", "key_field", "monkey", "hotkey", "api_version"],
)
def test_knobs_that_are_not_secrets(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: "value-42"}) == {key: "value-42"}


@pytest.mark.parametrize(
    ("value", "template"),
    [("${RAG_TOKEN}", True), ("Bearer ${RAG_TOKEN}", True), ("Token ${T}", True),
     ("${USER}:${PASS}", True), ("Bearer sk-canary", False), ("sk-canary${X}", False),
     ("Bearer sk-canary ${X}", False), ("$RAG_TOKEN", False), ("sk-canary", False),
     ("", False)],
)
def test_reference_only_values(value: str, template: bool) -> None:
    assert is_reference_only(value) is template
    expected = value if template else "***"
    assert redact({"headers": {"Authorization": value}}) == {
        "headers": {"Authorization": expected if value else ""}
    }


def test_redact_keeps_templates_inside_secret_tables_and_hides_literals() -> None:
    redacted = redact({"credentials": {"user": "${U}", "password": "hunter2", "port": 5432},
                       "chat": {"max_tokens": 512, "api_key": ["sk-1", "${K}"]}})
    assert redacted == {"credentials": {"user": "${U}", "password": "***", "port": "***"},
                        "chat": {"max_tokens": 512, "api_key": ["***", "${K}"]}}


def test_settings_hash_sees_max_tokens_and_header_templates() -> None:
    def digest(table: dict[str, object]) -> str:
        return settings_hash(redact({"pipeline": table}))

    assert digest({"chat": {"max_tokens": 64}}) != digest({"chat": {"max_tokens": 512}})
    assert digest({"headers": {"Authorization": "Bearer ${A}"}}) != digest(
        {"headers": {"Authorization": "Bearer ${B}"}})
    # A literal secret is hidden, so changing it leaves the hash alone.
    assert digest({"api_key": "sk-1"}) == digest({"api_key": "sk-2"})
