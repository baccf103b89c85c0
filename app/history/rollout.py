"""Reads one Codex rollout file (read-only) into a `Digest`: its metadata and the conversation's entries.

Codex writes one JSON record a line (`{timestamp, [ordinal], type, payload}`, see Codex's `RolloutLine`).
Two record families carry the conversation, and both are still read by Codex, so both are read here:
- paginated rollouts (the default since 0.16x): `event_msg` `item_completed` with `UserMessage`,
  `AgentMessage`, `CommandExecution`, `FileChange` items;
- legacy rollouts: `event_msg` `user_message`, `agent_message`, `exec_command_end`, `patch_apply_end`,
  `thread_rolled_back`, and the raw `response_item`s (`message`, `function_call`, `custom_tool_call`,
  `local_shell_call` and their outputs) where no such event was recorded. `ghost_snapshot` items are ignored,
  as Codex does. Compressed `.jsonl.zst` rollouts are read too.

Only lines whose record type matters are JSON-decoded (the type is read from the line's head), so the big
records (instructions, world state, token counts) cost a byte scan. Damage never raises: malformed lines, a
partial last line, unknown record types and huge lines are counted in `Skipped`.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

from snapshot_store.records import asdict, field, record

USER_MESSAGE_BEGIN = "## My request for Codex:"
HUGE_LINE = 16 * 1024 * 1024  # a longer line is skipped (and counted), not decoded
MAX_OUTPUT = 64 * 1024  # command output kept per command (head), enough to search and show
MAX_FILE = 2 * 1024 * 1024 * 1024

KNOWN_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state",
               "token_usage_record", "inter_agent_communication"}
EVENTS = {"item_completed", "user_message", "agent_message", "exec_command_end", "patch_apply_end",
          "task_started", "turn_started", "thread_rolled_back", "turn_aborted"}
RESPONSES = {"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
             "local_shell_call"}
SHELL_TOOLS = {"exec_command", "shell", "shell_command", "container.exec", "local_shell"}
# Text Codex injects as a user message but the user never typed.
INJECTED = ("<environment_context>", "<user_instructions>", "<turn_aborted>", "# AGENTS.md", "<permissions",
            "<skills_instructions>", "<user_shell_command>")


@functools.cache
def _patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes], re.Pattern[str]]:
    """The parser's patterns, compiled when a rollout is first parsed (~3 ms a search the index answers skips)."""
    return (re.compile(rb'"type"\s*:\s*"([A-Za-z_.]+)"'),
            re.compile(rb'"payload"\s*:\s*\{\s*"type"\s*:\s*"([A-Za-z_.]+)"'),
            re.compile(rb'"item"\s*:\s*\{\s*"type"\s*:\s*"([A-Za-z_]+)"'),
            re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M))


@record
class Skipped:
    """What could not be read, counted rather than fatal."""

    malformed: int = 0
    partial: int = 0
    unknown: int = 0
    huge: int = 0
    unreadable: int = 0

    def add(self, other: Skipped) -> None:
        self.malformed += other.malformed
        self.partial += other.partial
        self.unknown += other.unknown
        self.huge += other.huge
        self.unreadable += other.unreadable


@record
class Entry:
    """One thing in the conversation: a prompt, an agent message, a command, a set of file changes, a marker."""

    kind: str  # user | agent | command | files | marker
    text: str
    offset: int  # byte offset of the record in its file (forks inherit history up to an offset)
    at: str = ""  # ISO timestamp of the record
    turn_id: str | None = None
    exit_code: int | None = None
    output: str = ""
    paths: list[str] = field(default_factory=list)

    def search_text(self) -> str:
        """What `history search` matches (commands include their output)."""
        if self.kind == "command" and self.output:
            return f"{self.text}\n{self.output}"
        return self.text


@record
class Meta:
    """The rollout's own `session_meta` (the first one: a legacy fork copies its parent's after it)."""

    id: str = ""
    cwd: str = ""
    source: str = ""
    originator: str = ""
    cli_version: str = ""
    created: str = ""
    model_provider: str = ""
    forked_from_id: str | None = None
    history_base: dict[str, Any] | None = None  # {thread_id, end_ordinal_exclusive, end_byte_offset}


@record
class Digest:
    """Everything history needs from one rollout file."""

    path: str
    meta: Meta
    entries: list[Entry]
    skipped: Skipped
    last_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Digest:
        return Digest(path=doc["path"], meta=Meta(**doc["meta"]), entries=[Entry(**e) for e in doc["entries"]],
                      skipped=Skipped(**doc["skipped"]), last_at=doc.get("last_at", ""))

    def prompts(self) -> list[Entry]:
        return [e for e in self.entries if e.kind == "user"]


def _source(value: Any) -> str:
    """SessionSource is a string ("cli", "exec", "vscode"...) or an object ({"subagent": ...})."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value:
        return str(next(iter(value)))
    return ""


def _meta(payload: dict[str, Any], at: str) -> Meta:
    base = payload.get("history_base")
    return Meta(id=str(payload.get("id") or ""), cwd=str(payload.get("cwd") or ""),
                source=_source(payload.get("source")), originator=str(payload.get("originator") or ""),
                cli_version=str(payload.get("cli_version") or ""), created=str(payload.get("timestamp") or at),
                model_provider=str(payload.get("model_provider") or ""),
                forked_from_id=str(payload["forked_from_id"]) if payload.get("forked_from_id") else None,
                history_base=base if isinstance(base, dict) else None)


def _user_text(text: str) -> str:
    idx = text.find(USER_MESSAGE_BEGIN)
    return text[idx + len(USER_MESSAGE_BEGIN):].strip() if idx >= 0 else text.strip()


def _content_text(content: Any) -> str:
    """Text of a UserInput / message content list ([{type: text|input_text|output_text|Text, text}])."""
    if isinstance(content, str):
        return content
    parts = []
    for c in content or []:
        if isinstance(c, dict):
            if isinstance(c.get("text"), str):
                parts.append(c["text"])
            elif c.get("type") in ("image", "localImage", "input_image", "local_image"):
                parts.append("[image]")
    return "\n".join(parts)


def _command_text(cmd: Any) -> str:
    """A command Codex recorded as an argv list (`bash -lc '<cmd>'` shows as <cmd>) or a string."""
    if isinstance(cmd, list):
        argv = [str(a) for a in cmd]
        if len(argv) == 3 and os.path.basename(argv[0]) in ("bash", "sh", "zsh") and argv[1] in ("-c", "-lc"):
            return argv[2]
        return " ".join(argv)
    return str(cmd or "")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n[… output truncated by codexr history]"


def _changes(changes: Any) -> list[str]:
    if isinstance(changes, dict):
        out = []
        for path, change in changes.items():
            out.append(str(path))
            if isinstance(change, dict):
                moved = change.get("move_path") or (change.get("update") or {}).get("move_path") \
                    if isinstance(change.get("update"), dict) else change.get("move_path")
                if moved:
                    out.append(str(moved))
        return out
    if isinstance(changes, list):  # app-server shape [{path, kind, diff}]
        return [str(c.get("path")) for c in changes if isinstance(c, dict) and c.get("path")]
    return []


class _Reader:
    """Walks the lines of one rollout, building its digest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.meta: Meta | None = None
        self.skipped = Skipped()
        self.entries: list[Entry] = []
        self.turn: str | None = None
        self.last_at = ""
        self.responses: list[tuple[int, bytes]] = []
        self.seen_user = self.seen_cmd = self.seen_files = False
        self.rx_type, self.rx_payload_type, self.rx_item_type, self.rx_patch_path = _patterns()

    def add(self, e: Entry) -> None:
        self.entries.append(e)

    def line(self, offset: int, raw: bytes) -> None:
        head = raw[:400]
        m = self.rx_type.search(head)
        if not raw.lstrip().startswith(b"{") or not raw.rstrip().endswith(b"}"):
            self.skipped.malformed += 1
            return
        if m is None:
            self.line_slow(offset, raw)
            return
        rtype = m.group(1).decode()
        if rtype not in KNOWN_TYPES:
            self.skipped.unknown += 1
            return
        if rtype == "session_meta":
            if self.meta is None:
                self.decode(offset, raw)
            return
        if rtype == "event_msg":
            pm = self.rx_payload_type.search(raw, 0, 2000)
            if pm is not None and pm.group(1).decode() not in EVENTS:
                return
            if pm is not None and pm.group(1) == b"item_completed":
                im = self.rx_item_type.search(raw, 0, 4000)
                if im is not None and im.group(1) not in (b"UserMessage", b"AgentMessage", b"CommandExecution",
                                                          b"FileChange"):
                    return
            self.decode(offset, raw)
            return
        if rtype == "response_item":
            pm = self.rx_payload_type.search(raw, 0, 2000)
            if pm is None or pm.group(1).decode() in RESPONSES:
                self.responses.append((offset, raw))
            return
        # turn_context, world_state, token usage, compaction: not part of what history shows

    def line_slow(self, offset: int, raw: bytes) -> None:
        """A line whose head did not show its type (keys in another order): decode it to know."""
        self.decode(offset, raw, unknown_ok=True)

    def decode(self, offset: int, raw: bytes, unknown_ok: bool = False) -> None:
        try:
            rec = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            self.skipped.malformed += 1
            return
        if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
            self.skipped.malformed += 1
            return
        payload = rec.get("payload")
        at = str(rec.get("timestamp") or "")
        rtype = rec["type"]
        if not isinstance(payload, dict):
            self.skipped.malformed += 1
            return
        if rtype == "session_meta":
            if self.meta is None:
                self.meta = _meta(payload, at)
        elif rtype == "event_msg":
            self.event(offset, at, payload)
        elif rtype == "response_item":
            self.responses.append((offset, raw))
        elif rtype not in KNOWN_TYPES and unknown_ok:
            self.skipped.unknown += 1
        if at > self.last_at:
            self.last_at = at

    def event(self, offset: int, at: str, p: dict[str, Any]) -> None:
        kind = p.get("type")
        if at > self.last_at:
            self.last_at = at
        if kind in ("task_started", "turn_started"):
            attribution = p.get("turn_attribution")
            self.turn = str(p.get("turn_id") or (attribution or {}).get("turn_id") or "") or None
        elif kind == "item_completed":
            item = p.get("item") or {}
            turn = str(p.get("turn_id") or self.turn or "") or None
            self.item(offset, at, turn, item)
        elif kind == "user_message":
            text = _user_text(str(p.get("message") or ""))
            if not text and (p.get("images") or p.get("local_images")):
                text = "[image]"
            self.seen_user = True
            self.add(Entry("user", text, offset, at, self.turn))
        elif kind == "agent_message":
            self.add(Entry("agent", str(p.get("message") or ""), offset, at, self.turn))
        elif kind == "exec_command_end":
            self.seen_cmd = True
            out = p.get("aggregated_output") or p.get("formatted_output") or (
                str(p.get("stdout") or "") + str(p.get("stderr") or ""))
            self.add(Entry("command", _command_text(p.get("command")), offset, at,
                           str(p.get("turn_id") or self.turn or "") or None,
                           exit_code=p.get("exit_code") if isinstance(p.get("exit_code"), int) else None,
                           output=_clip(str(out))))
        elif kind == "patch_apply_end":
            self.seen_files = True
            paths = _changes(p.get("changes"))
            self.add(Entry("files", "\n".join(paths), offset, at, str(p.get("turn_id") or self.turn or "") or None,
                           paths=paths, exit_code=0 if p.get("success", True) else 1))
        elif kind == "thread_rolled_back":
            n = p.get("num_turns")
            if isinstance(n, int) and n > 0:
                self.rollback(n, offset, at)
        elif kind == "turn_aborted":
            self.add(Entry("marker", f"turn {p.get('reason') or 'aborted'}", offset, at, self.turn))

    def item(self, offset: int, at: str, turn: str | None, item: dict[str, Any]) -> None:
        t = item.get("type")
        if t == "UserMessage":
            self.seen_user = True
            self.add(Entry("user", _user_text(_content_text(item.get("content"))), offset, at, turn))
        elif t == "AgentMessage":
            self.add(Entry("agent", _content_text(item.get("content")), offset, at, turn))
        elif t == "CommandExecution":
            self.seen_cmd = True
            code = item.get("exit_code")
            self.add(Entry("command", _command_text(item.get("command")), offset, at, turn,
                           exit_code=code if isinstance(code, int) else None,
                           output=_clip(str(item.get("aggregated_output") or ""))))
        elif t == "FileChange":
            self.seen_files = True
            paths = _changes(item.get("changes"))
            self.add(Entry("files", "\n".join(paths), offset, at, turn, paths=paths,
                           exit_code=0 if item.get("status", "completed") == "completed" else 1))

    def rollback(self, n: int, offset: int, at: str) -> None:
        """Codex dropped the last `n` prompts from the thread (legacy rollback): so does history."""
        users = [i for i, e in enumerate(self.entries) if e.kind == "user"]
        cut = users[-n] if len(users) >= n else (users[0] if users else len(self.entries))
        del self.entries[cut:]
        self.add(Entry("marker", f"rolled back {n} prompt(s)", offset, at, None))

    def finish_responses(self) -> None:
        """Fill what no event recorded from the raw response items (older and limited rollouts)."""
        need_msgs, need_cmds, need_files = not self.seen_user, not self.seen_cmd, not self.seen_files
        if not (need_msgs or need_cmds or need_files) or not self.responses:
            return
        calls: dict[str, Entry] = {}
        extra: list[Entry] = []
        for offset, raw in self.responses:
            try:
                rec = json.loads(raw.decode("utf-8", "replace"))
                p = rec["payload"]
                at = str(rec.get("timestamp") or "")
                t = p.get("type")
            except (ValueError, KeyError, TypeError, AttributeError):
                self.skipped.malformed += 1
                continue
            meta = p.get("internal_chat_message_metadata_passthrough") or {}
            turn = str(meta.get("turn_id") or "") or None if isinstance(meta, dict) else None
            if t == "message" and need_msgs and p.get("role") in ("user", "assistant"):
                text = _content_text(p.get("content"))
                if p.get("role") == "user":
                    if text.lstrip().startswith(INJECTED):
                        continue
                    extra.append(Entry("user", _user_text(text), offset, at, turn))
                elif text:
                    extra.append(Entry("agent", text, offset, at, turn))
            elif t in ("function_call", "local_shell_call") and need_cmds:
                cmd = self._call_command(p)
                if cmd is not None:
                    e = Entry("command", cmd, offset, at, turn)
                    calls[str(p.get("call_id") or p.get("id") or offset)] = e
                    extra.append(e)
            elif t in ("function_call_output", "custom_tool_call_output") and need_cmds:
                e2 = calls.get(str(p.get("call_id")))
                if e2 is not None:
                    out = p.get("output")
                    if isinstance(out, dict):
                        out = out.get("content") or json.dumps(out)
                    e2.output = _clip(str(out or ""))
            elif t == "custom_tool_call" and need_files and p.get("name") == "apply_patch":
                paths = [a or b for a, b in self.rx_patch_path.findall(str(p.get("input") or ""))]
                if paths:
                    extra.append(Entry("files", "\n".join(paths), offset, at, turn, paths=paths))
        if extra:
            self.entries = sorted([*self.entries, *extra], key=lambda e: e.offset)

    @staticmethod
    def _call_command(p: dict[str, Any]) -> str | None:
        if p.get("type") == "local_shell_call":
            action = p.get("action") or {}
            return _command_text(action.get("command")) if isinstance(action, dict) else None
        if p.get("name") not in SHELL_TOOLS:
            return None
        try:
            args = json.loads(p.get("arguments") or "{}")
        except (ValueError, TypeError):
            return None
        if not isinstance(args, dict):
            return None
        return _command_text(args.get("cmd") or args.get("command"))


def _open_bytes(path: Path) -> bytes:
    """The whole rollout (plain or zstd-compressed), read once."""
    if path.name.endswith(".zst"):
        return read_zst(path, MAX_FILE)
    with path.open("rb") as fh:
        return fh.read(MAX_FILE)


def read_zst(path: Path | str, limit: int = -1) -> bytes:
    """A compressed rollout's bytes; damage is an OSError, as for any file that cannot be read."""
    import zstandard  # ~8 ms (it imports platform): only .zst rollouts need it

    with open(path, "rb") as fh:
        try:
            return bytes(zstandard.ZstdDecompressor().stream_reader(fh).read(limit))
        except zstandard.ZstdError as exc:
            raise OSError(f"{path}: not a readable zstd stream: {exc}") from exc


def parse_bytes(path: str, data: bytes) -> Digest:
    """The digest of a rollout's bytes (a partial last line — a session still writing — is counted, not read)."""
    r = _Reader(path)
    pos, n = 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        if end < 0:
            if data[pos:].strip():
                r.skipped.partial += 1
            break
        if end - pos > HUGE_LINE:
            r.skipped.huge += 1
        elif end > pos and data[pos:end].strip():
            r.line(pos, data[pos:end])
        pos = end + 1
    r.finish_responses()
    return Digest(path, r.meta or Meta(), r.entries, r.skipped, r.last_at)


def read_rollout(path: Path) -> Digest:
    """The digest of one rollout file; an unreadable file is an empty digest with `unreadable` counted."""
    try:
        data = _open_bytes(path)
    except OSError:
        return Digest(str(path), Meta(), [], Skipped(unreadable=1))
    return parse_bytes(str(path), data)
