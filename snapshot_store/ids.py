"""Ids are validated before they ever become part of a path (dulwich's rule)."""

from __future__ import annotations

import os
import re

import blake3

_SNAPSHOT_RE = re.compile(r"[0-9a-f]{64}")
_PACK_RE = re.compile(r"[0-9a-f]{32}")
_PREFIX_RE = re.compile(r"[0-9a-f]{4,64}")


def is_snapshot_id(text: str) -> bool:
    """A full snapshot id: 64 lowercase hex digits (a blake3 digest)."""
    return _SNAPSHOT_RE.fullmatch(text) is not None


def is_snapshot_prefix(text: str) -> bool:
    """At least 4 hex digits, as users type them."""
    return _PREFIX_RE.fullmatch(text) is not None


def is_pack_id(text: str) -> bool:
    """A pack id: 32 lowercase hex digits."""
    return _PACK_RE.fullmatch(text) is not None


def new_pack_id() -> str:
    """Packs are named randomly: their content is addressed blob by blob, not as a whole."""
    return os.urandom(16).hex()


def digest_hex(data: bytes) -> str:
    """blake3 of `data` as hex."""
    return blake3.blake3(data).hexdigest()


def workspace_key(root: str) -> str:
    """A stable file name for a workspace root (its absolute path may hold any character)."""
    return blake3.blake3(root.encode("utf-8", "surrogateescape")).hexdigest()[:32]
