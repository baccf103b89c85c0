"""The approval-and-sandbox presets of /permissions: the official Codex TUI's three, with its ids and words.

Each preset pairs an approval policy (when Codex asks before acting) with a sandbox (what a command may
touch). A change applies from the next prompt on: codexr sends both with every later `turn/start`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SessionError

# Codex's sandbox policy objects (turn/start `sandboxPolicy`) by the mode names thread/start and config use
SANDBOX_TYPES = {"read-only": "readOnly", "workspace-write": "workspaceWrite", "danger-full-access": "dangerFullAccess",
                 "external-sandbox": "externalSandbox"}
SANDBOX_MODES = {v: k for k, v in SANDBOX_TYPES.items()}


@dataclass(frozen=True)
class Preset:
    """One choice of /permissions."""

    id: str
    label: str
    description: str
    approval: str  # approvalPolicy
    sandbox: str  # sandbox mode: read-only | workspace-write | danger-full-access

    def summary(self) -> str:
        """`Read Only (approval on-request, sandbox read-only)`."""
        return f"{self.label} (approval {self.approval}, sandbox {self.sandbox})"


PRESETS: tuple[Preset, ...] = (
    Preset("read-only", "Read Only", "Codex can read files in the current workspace. Approval is required to edit "
           "files or access the internet.", "on-request", "read-only"),
    Preset("auto", "Default", "Codex can read and edit files in the current workspace, and run commands. Approval "
           "is required to access the internet or edit other files.", "on-request", "workspace-write"),
    Preset("full-access", "Full Access", "Codex can edit files outside this workspace and access the internet "
           "without asking for approval. Exercise caution when using.", "never", "danger-full-access"),
)

# Choosing Full Access asks first, as the official TUI does ("Enable Full Access?")
FULL_ACCESS_QUESTION = "Enable Full Access?"
FULL_ACCESS_WARNING = ("Codex will run without sandboxing: it can edit any file on your computer and run commands "
                       "with network access, without asking for approval.")


def find_preset(name: str) -> Preset:
    """The preset `name` means: its id or its label, any case (`default` is `auto`); SessionError otherwise."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    for p in PRESETS:
        if key in (p.id, p.label.lower().replace(" ", "-")):
            return p
    names = ", ".join(p.id for p in PRESETS)
    raise SessionError(f"no permissions preset {name.strip()!r}: the presets are {names}")


def matching_preset(approval: str, sandbox: str) -> Preset | None:
    """The preset these settings are, if any (a configured mix such as never + read-only is none)."""
    return next((p for p in PRESETS if p.approval == approval and p.sandbox == sandbox), None)


def sandbox_policy(mode: str) -> dict[str, str]:
    """turn/start's `sandboxPolicy` object for a sandbox mode name."""
    return {"type": SANDBOX_TYPES[mode]}


def sandbox_mode(policy: object) -> str:
    """The mode name of what Codex reports (a policy object `{type: readOnly}` or already a name); "" if unknown."""
    if isinstance(policy, dict):
        kind = str(policy.get("type") or "")
        return SANDBOX_MODES.get(kind, kind)
    return str(policy or "")


def approval_name(policy: object) -> str:
    """The approval policy Codex reports as a word (`granular` for its table form)."""
    if isinstance(policy, dict):
        return "granular" if "granular" in policy else "custom"
    return str(policy or "")
