"""One HTTP service table (``[pipeline.chat]``, ``[pipeline.embedding]``, ``[pipeline.rerank]``,
``[judge]``): the knobs they all share, and a client that sends JSON by their rules.

Every table that names a model behind an HTTP API has the same transport: ``base_url``,
``model``, ``api_key_env``, ``timeout``, ``max_retries``, ``retry_backoff``,
``max_consecutive_failures`` and ``extra_headers``. :class:`EndpointConfig` reads them
from a :class:`~pytest_ragev.core.tables.Table`, so every message names the table it came
from (``ragev.toml: [judge] timeout = 0 is invalid; ...``), and :class:`EndpointClient`
sends by one set of rules: the key read from the environment on every call and never
stored, retries with backoff and ``Retry-After``, a circuit breaker, same-origin
redirects only, secrets scrubbed from every message, and a preflight before the run.

Standard library only; holds no secret value, so ``repr()``, snapshots and identities of
these objects never show one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_ragev.clients import _env, _retry
from pytest_ragev.clients._breaker import DEFAULT_LIMIT, Breaker
from pytest_ragev.core.errors import PipelineError
from pytest_ragev.core.redact import Secret, redact_urls, url_secrets
from pytest_ragev.core.tables import Table

#: The keys every service table shares (each table adds its own).
ENDPOINT_KEYS = (
    "base_url", "model", "api_key_env", "timeout", "max_retries", "retry_backoff",
    "max_consecutive_failures", "extra_headers",
)
#: Knobs that change how a request travels, not what the model answers: kept out of
#: answer keys and cache identities, so raising a timeout throws no cache away.
TRANSPORT_KEYS = frozenset({"api_key_env", "timeout", "max_retries", "retry_backoff",
                            "extra_headers", "max_consecutive_failures"})
#: The preflight's own patience: one quick look, not a question's retry budget.
PREFLIGHT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EndpointConfig:
    """The shared knobs of one service table, resolved (defaults filled in).

    ``label`` is how messages name the table (``[pipeline.embedding]``). Holds no secret
    value: the key's variable NAME, header values as written (``${VAR}`` unexpanded).
    """

    label: str
    base_url: str
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    max_consecutive_failures: int = DEFAULT_LIMIT
    # Literal header values may be credentials: keep them out of repr().
    extra_headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_table(
        cls, opts: Table, *, model_example: str = "qwen2.5-7b-instruct",
        base_url_example: str = "http://127.0.0.1:8000/v1",
    ) -> EndpointConfig:
        """Read the shared keys of ``opts`` (its label is ``opts.where``); one-line
        :class:`~pytest_ragev.core.errors.ConfigError` naming the table on a bad value.

        Only these keys are read: the caller checks the table's keys (``check_keys`` with
        :data:`ENDPOINT_KEYS` and its own), so a typo gets a did-you-mean over them all.
        """
        base_url = opts.string("base_url", required=True)
        assert base_url is not None
        if not base_url.startswith(("http://", "https://")):
            raise opts.fail("base_url", redact_urls(base_url),
                            f"write the API root, e.g. base_url = \"{base_url_example}\"")
        if url_secrets(base_url):
            # The config would record the password, and urllib cannot send it anyway.
            raise opts.fail("base_url", redact_urls(base_url),
                            "keep credentials out of the URL: name the variable holding the "
                            "key in api_key_env, or send a header from ${VAR} in extra_headers")
        model = opts.string("model", required=True)
        if not model:
            raise opts.fail("model", model, f"name the model, e.g. model = \"{model_example}\"")
        key_env = opts.string("api_key_env")
        if key_env is not None and (not key_env or "=" in key_env or key_env.startswith("$")):
            raise opts.fail("api_key_env", key_env, "give the NAME of the environment variable "
                            "holding the key, e.g. api_key_env = \"OPENAI_API_KEY\"")
        timeout = opts.number("timeout", 60.0, low=0.0, low_open=True, example="60")
        backoff = opts.number("retry_backoff", 0.5, low=0.0, example="0.5")
        retries = opts.integer("max_retries", 3, low=0, example="3")
        stop_after = opts.integer("max_consecutive_failures", DEFAULT_LIMIT, low=0, example="5")
        assert timeout is not None and backoff is not None and retries is not None
        assert stop_after is not None
        return cls(
            label=opts.where,
            base_url=base_url.rstrip("/"),
            model=model,
            api_key_env=key_env,
            timeout=timeout,
            max_retries=retries,
            retry_backoff=backoff,
            max_consecutive_failures=stop_after,
            extra_headers=opts.string_table("extra_headers"),
        )

    def url(self, path: str) -> str:
        """``{base_url}/{path}``: where a request for ``path`` goes."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def snapshot(self) -> dict[str, Any]:
        """The shared knobs, JSON-safe: the key's variable NAME, literal credentials ``***``."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "retry_backoff": self.retry_backoff,
            "max_consecutive_failures": self.max_consecutive_failures,
            "extra_headers": _env.snapshot_headers(self.extra_headers),
        }

    def identity(self) -> dict[str, Any]:
        """What names the model for a cache key: the endpoint and the model, no secret and
        no transport knob (a new timeout or key serves the same model)."""
        return {"base_url": self.base_url, "model": self.model}

    def retry_policy(self) -> _retry.RetryPolicy:
        """Timeout and retry settings for every request of a call."""
        return _retry.RetryPolicy(timeout=self.timeout, max_retries=self.max_retries,
                                  backoff=self.retry_backoff)


class EndpointClient:
    """Sends JSON to paths under one :class:`EndpointConfig`'s ``base_url``.

    Holds no secret and no mutable state but its circuit breaker, which counts across
    threads: one client may be called from many threads at once.
    """

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.breaker = Breaker(config.max_consecutive_failures,
                               knob=f"{config.label} max_consecutive_failures")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(label={self.config.label!r}, "
                f"model={self.config.model!r}, base_url={self.config.base_url!r})")

    @property
    def what(self) -> str:
        """How messages name a call: ``[pipeline.embedding] model 'bge-m3'``."""
        return f"{self.config.label} model {self.config.model!r}"

    def missing_environment(self) -> list[str]:
        """One line per environment variable a request needs and the environment lacks."""
        cfg = self.config
        lines = []
        if cfg.api_key_env is not None and not os.environ.get(cfg.api_key_env):
            lines.append(self.unset_key_line())
        lines += [f"{cfg.label} extra_headers refer to ${{{var}}}, which is not set; "
                  f"export {var}=... before running pytest"
                  for var in _env.unset_references(cfg.extra_headers)]
        return lines

    def unset_key_line(self) -> str:
        """The one line that says ``api_key_env`` names a variable that is not set."""
        var = self.config.api_key_env
        return (f"{self.config.label} api_key_env = {var!r}: the environment variable {var} "
                f"is not set; export {var}=... or remove api_key_env for a server without "
                "authentication")

    def headers(self) -> tuple[dict[str, str], list[str]]:
        """The request headers (the key expanded from the environment) and the secrets
        every message must be scrubbed of; both hold them as :class:`Secret`."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        cfg = self.config
        headers, secrets = _env.expand_headers(cfg.extra_headers, where=cfg.label)
        if cfg.api_key_env is not None:
            key = Secret(os.environ.get(cfg.api_key_env) or "")
            if not key:
                raise PipelineError(self.unset_key_line())
            headers["Authorization"] = Secret(f"Bearer {key}")
            secrets.append(key)
        return headers, secrets

    def post(self, path: str, payload: Any, *, what: str | None = None) -> _retry.Response:
        """POST ``payload`` as JSON to ``{base_url}/{path}`` with retries and the breaker;
        the decoded 2xx reply (scrubbed of the request's secrets), else a one-line
        :class:`PipelineError` prefixed with ``what`` (default :attr:`what`)."""
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        headers, secrets = self.headers()
        return _retry.send(
            method="POST",
            url=self.config.url(path),
            headers=headers,
            payload=payload,
            policy=self.config.retry_policy(),
            what=what or self.what,
            client_error_hint=self.hint,
            secrets=secrets,
            breaker=self.breaker,
        )

    def preflight(self, path: str = "models") -> str | None:
        """One look at the server before any question: ``None`` when it is there and takes
        the key, else why the run cannot go on (one line).

        It asks ``GET {base_url}/{path}`` (``/models``: every OpenAI-compatible server we
        know has it, and it costs no tokens) with one retry and at most
        :data:`PREFLIGHT_TIMEOUT_S`. No connection, no answer in time, 401/403, or a
        redirect to another origin (not followed: every request would meet it) stop the
        run; any other answer, a 404 of a server without the route included, shows a
        server that is listening.
        """
        __tracebackhide__ = True  # its locals hold the key (pytest -l)
        cfg = self.config
        policy = _retry.RetryPolicy(timeout=min(cfg.timeout, PREFLIGHT_TIMEOUT_S),
                                    max_retries=min(cfg.max_retries, 1), backoff=cfg.retry_backoff)
        try:
            headers, secrets = self.headers()
            _retry.send(method="GET", url=cfg.url(path), headers=headers, payload=None,
                        policy=policy, what=f"{self.what}: preflight",
                        client_error_hint=self.hint, secrets=secrets)
        except _retry.RedirectRefused as error:
            return str(error)  # the server moved elsewhere: no request would get an answer
        except PipelineError as error:
            if (error.transport and error.status is None) or error.status in _retry.AUTH_STATUSES:
                return str(error)  # nobody answered, or the key was refused
        return None

    def hint(self, status: int, message: str) -> str:
        """The fix a 4xx reply (other than 429) suggests."""
        if status in (401, 403):
            if self.config.api_key_env is None:
                return "the server wants a key: set api_key_env to the variable holding it"
            return f"check the key in ${self.config.api_key_env}"
        if status == 404:
            return (f"check base_url ({self.config.base_url}) and model "
                    f"({self.config.model!r})")
        return f"check the {self.config.label} settings against the server's API"


def reply_keys(body: Any) -> str:
    """The top-level keys of a reply, for a message that says what was found instead."""
    if isinstance(body, Mapping):
        return ", ".join(sorted(map(str, body))) or "none"
    return f"none, the body is a JSON {type(body).__name__}"
