"""The decoded store files a resident server keeps between commands (snapshot_store/decoded.py).

The server owns them (`hold` in its warm-up) and every store a command opens in it or in its forks is handed
them (app/context.py); in any other process there are none and stores read the disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from snapshot_store.decoded import DecodedFiles

_held: list[DecodedFiles] = []  # the server's one instance, once it holds one (this process and its forks)


def hold() -> DecodedFiles:
    """The server's decoded files, made on first use."""
    if not _held:
        from snapshot_store.store import decoded_files

        _held.append(decoded_files())
    return _held[0]


def held() -> DecodedFiles | None:
    """The decoded files this process holds (a server or its fork), or None."""
    return _held[0] if _held else None
