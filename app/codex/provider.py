"""Where Codex sends its model requests, read as Codex reads it, and whether anything answers there.

Why: when nothing answers at the provider's address, Codex 0.163.0 waits for the network with no limit of its own
(`stream_max_retries` does not bound it) and its app-server starts happily, so neither `doctor`'s app-server check
nor a turn says what is wrong. `doctor` asks the address once (`probe`), and `exec` names it when it gives up.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Codex's built-in provider when config.toml names none.
DEFAULT_PROVIDER = "openai"
OPENAI_API_URL = "https://api.openai.com/v1"
CHATGPT_URL = "https://chatgpt.com/backend-api/codex"
#: Seconds `probe` waits for an answer: a provider that cannot answer a GET in this long is not usable.
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Provider:
    """The model provider a Codex run uses: its config name, base URL (None: unknown here) and key variable."""

    name: str
    base_url: str | None
    env_key: str | None = None
    from_table: bool = False  # the address comes from a `[model_providers.NAME]` table of config.toml


@dataclass(frozen=True)
class ProbeResult:
    """What one request to the provider found: `answered` is any HTTP answer at all (even 401 or 404)."""

    answered: bool
    detail: str


def _table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _with_overrides(doc: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """config.toml with Codex's `-c key=value` flags applied as Codex applies them (a malformed one is skipped:
    the command line's own check reports it)."""
    from config.files import ConfigError
    from config.loader import _apply_override, _parse_override

    for raw in overrides:
        try:
            key_path, value = _parse_override(raw)
        except ConfigError:
            continue
        _apply_override(doc, key_path, value)
    return doc


def provider_of(doc: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                chatgpt_login: bool = False) -> Provider:
    """The provider a Codex config document selects (top level, or the chosen `profile`), and its address."""
    env = os.environ if environ is None else environ
    profile = _table(_table(doc, "profiles"), str(doc.get("profile") or ""))
    name = str(profile.get("model_provider") or doc.get("model_provider") or DEFAULT_PROVIDER)
    table = _table(_table(doc, "model_providers"), name)
    env_key = str(table["env_key"]) if table.get("env_key") else None
    if table.get("base_url"):
        return Provider(name, str(table["base_url"]), env_key, from_table=True)
    if name == DEFAULT_PROVIDER:
        url = env.get("OPENAI_BASE_URL") or (CHATGPT_URL if chatgpt_login else OPENAI_API_URL)
        return Provider(name, url, env_key or "OPENAI_API_KEY")
    return Provider(name, None, env_key)  # another provider built into Codex (oss, ollama...): not known here


def configured_provider(codex_home: Path, overrides: Sequence[str] = (), chatgpt_login: bool = False,
                        environ: Mapping[str, str] | None = None) -> Provider | None:
    """The provider of CODEX_HOME/config.toml with `-c` flags; None when config.toml cannot be read."""
    from config.files import CONFIG_FILE_NAME, ConfigError, read_toml

    try:
        doc = read_toml(codex_home / CONFIG_FILE_NAME, CONFIG_FILE_NAME) or {}
    except ConfigError:
        return None
    return provider_of(_with_overrides(doc, overrides), environ, chatgpt_login)


def probe(provider: Provider, timeout: float = PROBE_TIMEOUT_S, environ: Mapping[str, str] | None = None
          ) -> ProbeResult:
    """One GET of `{base_url}/models` (no tokens spent), with the provider's key when it is set: any HTTP answer
    means something serves there; refused, unresolvable or silent for `timeout` seconds means nothing does."""
    import urllib.error
    import urllib.request

    assert provider.base_url is not None
    env = os.environ if environ is None else environ
    url = provider.base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, method="GET", headers={"User-Agent": "codexr-doctor"})
    key = env.get(provider.env_key) if provider.env_key else None
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return ProbeResult(True, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        exc.close()
        return ProbeResult(True, f"HTTP {exc.code}")
    except urllib.error.URLError as exc:
        return ProbeResult(False, _why(exc.reason, timeout))
    except (OSError, ValueError) as exc:  # a timeout while reading, a reset, a URL urllib cannot use
        return ProbeResult(False, _why(exc, timeout))


def _why(reason: object, timeout: float) -> str:
    """A failed request's cause in a few words."""
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"host not found ({reason.strerror or reason})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason})"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__
