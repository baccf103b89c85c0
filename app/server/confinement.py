"""Whether a command runs in Codex's sandbox, and what confines a process (snapshot_store/confinement.py: the change
monitor's peer checks need it too, and the store never imports the app).

Imports: `os` and the store's confinement module only (app/launch.py runs this in every one-shot command).
"""

from __future__ import annotations

from snapshot_store.confinement import alive as alive
from snapshot_store.confinement import fingerprint as fingerprint
from snapshot_store.confinement import of_peer as of_peer
from snapshot_store.confinement import peer as peer
from snapshot_store.confinement import peer_pidfd as peer_pidfd
from snapshot_store.confinement import pidfd_pid as pidfd_pid

TYPE_CHECKING = False  # not `typing`'s (its import costs ~15 ms); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Mapping

#: Variables Codex sets for commands it runs in its sandbox (macOS's seatbelt, and no network on every platform).
SANDBOX_VARS = ("CODEX_SANDBOX",)


def in_codex_sandbox(env: Mapping[str, str]) -> bool:
    """Whether `env` is that of a command Codex runs in its sandbox (by the variables it sets there)."""
    return any(name.startswith(SANDBOX_VARS) for name in env)
