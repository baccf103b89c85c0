"""Who may open a WebSocket to codexr's proxy, decided in the HTTP handshake before any app-server starts (issue 30).

In order, the first refusal answering with its status and one line: no web page (any `Origin` header: a browser
tab's `new WebSocket(...)` sends one, no other client does; the real app-server refuses it too), on TCP no `Host`
but the loopback address and port actually bound (a page on a name rebound to 127.0.0.1 sends its own name), the
peer's own check (this user, confined alike; or the one process codexr started), then the capability token when
one is required (`Authorization: Bearer TOKEN`, as Codex's `--ws-auth capability-token` and the official TUI's
`--remote-auth-token-env` speak it; compared in constant time).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cmds.context import UsageError

#: The names a client may give in `Host` for a loopback TCP listener (with the port bound).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: Codex's own words for a refused token (`codex app-server --ws-auth capability-token`, 0.163.0).
MISSING, INVALID, MALFORMED = ("missing websocket bearer token", "invalid websocket bearer token",
                               "invalid authorization header")


@dataclass(frozen=True)
class Token:
    """A capability token, kept as its SHA-256 digest: every comparison hashes what was presented, so its time
    says nothing about the token (and `--ws-token-sha256` needs no other path)."""

    digest: bytes

    def admits(self, presented: str) -> bool:
        return hmac.compare_digest(hashlib.sha256(presented.encode()).digest(), self.digest)


def token_from_file(path: str) -> Token:
    """`--ws-token-file PATH`: the file's content, surrounding whitespace trimmed (as Codex reads it)."""
    try:
        text = Path(path).read_bytes().decode("utf-8").strip()
    except OSError as exc:
        raise UsageError(f"failed to read websocket auth secret {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"websocket auth secret {path} is not UTF-8 text") from exc
    if not text:
        raise UsageError(f"websocket auth secret {path} must not be empty")
    return Token(hashlib.sha256(text.encode()).digest())


def token_from_sha256(hexdigest: str) -> Token:
    """`--ws-token-sha256 HEX`: the token's SHA-256 digest, 64 hex digits."""
    if not re.fullmatch(r"[0-9a-fA-F]{64}", hexdigest):
        raise UsageError("--ws-token-sha256 must be a 64-character hex SHA-256 digest")
    return Token(bytes.fromhex(hexdigest))


@dataclass(frozen=True)
class Refusal:
    """Why a handshake is refused: the HTTP status and one line."""

    status: int
    reason: str


@dataclass
class Door:
    """The checks for one listener; `process_request` is websockets' hook, run before the handshake completes."""

    peer: Callable[[Any], str | None]
    """The peer's own check, on the connection's socket: why it is refused, or None."""
    hosts: frozenset[str] | None = None
    """The `Host` values accepted (lower case); None: not checked (a unix socket, where no name leads)."""
    token: Token | None = None
    log: Callable[[str], None] = field(default=lambda _line: None)

    @classmethod
    def loopback_hosts(cls, port: int) -> frozenset[str]:
        """`Host` as a client of `ws://127.0.0.1:PORT` (or localhost, or [::1]) writes it."""
        names = {f"{name}:{port}" for name in LOOPBACK_NAMES}
        if port == 80:  # a client leaves out the default port
            names |= set(LOOPBACK_NAMES)
        return frozenset(names)

    def check(self, headers: Any, sock: Any) -> Refusal | None:
        """The first check `headers` (websockets' Headers) and the peer on `sock` fail, or None: admitted."""
        if "Origin" in headers:
            return Refusal(403, "a web page may not connect: the request carries an Origin header")
        if self.hosts is not None:
            hosts = headers.get_all("Host")
            if len(hosts) != 1 or hosts[0].strip().lower() not in self.hosts:
                shown = ascii(hosts[0][:80]) if len(hosts) == 1 else f"{len(hosts)} Host headers"
                return Refusal(403, f"Host {shown} is not this listener's loopback address and port")
        why = self.peer(sock)
        if why is not None:
            return Refusal(403, why)
        if self.token is not None:
            given = headers.get_all("Authorization")
            if not given:
                return Refusal(401, MISSING)
            scheme, _, value = given[0].strip().partition(" ")
            if len(given) > 1 or scheme.lower() != "bearer" or not value.strip():
                return Refusal(401, MALFORMED)
            if not self.token.admits(value.strip()):
                return Refusal(401, INVALID)
        return None

    def process_request(self, connection: Any, request: Any) -> Any:
        """websockets' `process_request`: None lets the handshake go on; a refusal is its HTTP response."""
        refusal = self.check(request.headers, connection.transport.get_extra_info("socket"))
        if refusal is None:
            return None
        self.log(f"refused a connection ({refusal.status}): {refusal.reason}")
        response = connection.respond(refusal.status, refusal.reason + "\n")
        if refusal.status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response


def token_from_flags(mode: str | None, token_file: str | None, token_sha256: str | None, jwt_flags: list[str],
                     load: bool) -> Token | None:
    """The token `codex app-server`'s `--ws-auth` flags ask for, checked as Codex checks them (the same lines);
    `load`: read it (a listener; on stdio the flags are only checked, as Codex does). Fails closed: a mode codexr
    does not implement is refused, never served without authentication."""
    if mode is None:
        if token_file or token_sha256 or jwt_flags:
            raise UsageError("websocket auth flags require `--ws-auth capability-token` or "
                             "`--ws-auth signed-bearer-token`")
        return None
    if mode == "signed-bearer-token":
        if token_file or token_sha256:
            raise UsageError("`--ws-token-file` and `--ws-token-sha256` require `--ws-auth capability-token`, "
                             "not `signed-bearer-token`")
        if "--ws-shared-secret-file" not in jwt_flags:
            raise UsageError("`--ws-shared-secret-file` is required when `--ws-auth signed-bearer-token` is set")
        raise UsageError("--ws-auth signed-bearer-token (signed JWTs) is not implemented by codexr app-server, "
                         "which will not serve without the authentication asked for: use --ws-auth capability-token")
    if jwt_flags:
        raise UsageError("`--ws-shared-secret-file`, `--ws-issuer`, `--ws-audience`, and "
                         "`--ws-max-clock-skew-seconds` require `--ws-auth signed-bearer-token`")
    if token_file and token_sha256:
        raise UsageError("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive")
    if not token_file and not token_sha256:
        raise UsageError("`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` "
                         "is set")
    if token_sha256 is not None:
        return token_from_sha256(token_sha256)
    assert token_file is not None
    return token_from_file(token_file) if load else None
