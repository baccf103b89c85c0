"""The state of every path an agent patch touched, as it was before the turn — from the patch itself.

Codex has no pre-edit hook, but its `fileChange` items say enough: an added file was absent (the
patch created it), a deleted file held the text the item carries, and an updated file's earlier
text is its later text with the item's unified diff applied in reverse. Each reversal is checked
by applying the diff forward again; a path whose chain does not check out is *not recoverable*
and is named, never guessed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from snapshot_store.manifest import Entry, FileEntry, LinkEntry
from snapshot_store.safefs import SafeRoot, UnsafePath
from snapshot_store.states import FileState

MAX_TEXT_BYTES = 64 * 1024 * 1024
UNSEEN_MODE = 0o600  # a deleted file's mode is not in the patch: when nothing saw it, never wider than this
UNSEEN_NOTE = "its mode and type were never seen (no snapshot or earlier record held it): created 0600"
SEEN_NOTE = "mode and type as {what} saw them"
SIBLING_SCAN = 4096  # directory entries looked at for a deleted symlink's likely target
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_MOVED = re.compile(r"\n*Moved to: [^\n]*\n?\Z")


class NotRecoverable(Exception):
    """The pre-edit text cannot be derived with certainty (the reason is the message)."""


@dataclass(frozen=True)
class PatchChange:
    """One file of one `fileChange` item, with real absolute paths."""

    path: str
    kind: str  # add | delete | update (| failed: a patch that failed part-way)
    diff: str
    move_path: str | None = None


def changes_of(item: dict[str, Any]) -> list[PatchChange]:
    """The per-file changes of a fileChange item (paths made real; `Moved to:` trailers dropped)."""
    out = []
    for ch in item.get("changes") or []:
        path = ch.get("path")
        kind = ch.get("kind")
        kind_type = kind.get("type") if isinstance(kind, dict) else kind
        if not isinstance(path, str) or not path or kind_type not in ("add", "delete", "update"):
            continue
        move = kind.get("move_path") or kind.get("movePath") if isinstance(kind, dict) else None
        diff = str(ch.get("diff") or "")
        if move:
            diff = _MOVED.sub("\n", diff) if diff.rstrip("\n").endswith(f"Moved to: {move}") else diff
        out.append(PatchChange(os.path.realpath(path), str(kind_type), diff,
                               os.path.realpath(move) if isinstance(move, str) and move else None))
    return out


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass
class _Hunk:
    old_start: int
    old: list[str]
    new_start: int
    new: list[str]


def parse_hunks(diff: str) -> list[_Hunk]:
    """The hunks of a header-less unified diff (as Codex puts in an update's `diff`)."""
    hunks: list[_Hunk] = []
    counts: list[tuple[int, int]] = []
    lasts: list[list[str]] = []  # the side(s) the previous body line went to
    for raw in diff.split("\n"):
        m = _HUNK.match(raw)
        if m:
            a, b, c, d = m.groups()
            hunks.append(_Hunk(int(a), [], int(c), []))
            counts.append((int(b) if b is not None else 1, int(d) if d is not None else 1))
            continue
        if not hunks:
            if raw.strip():
                raise NotRecoverable("the patch's diff has no hunk header")
            continue
        h = hunks[-1]
        if raw.startswith("\\"):
            for side in lasts:
                if side and side[-1].endswith("\n"):
                    side[-1] = side[-1][:-1]  # "\ No newline at end of file"
            continue
        if raw == "":
            lasts = []
            continue
        tag, text = raw[0], raw[1:] + "\n"
        if tag == " ":
            h.old.append(text)
            h.new.append(text)
            lasts = [h.old, h.new]
        elif tag == "-":
            h.old.append(text)
            lasts = [h.old]
        elif tag == "+":
            h.new.append(text)
            lasts = [h.new]
        else:
            raise NotRecoverable(f"the patch's diff has an unexpected line {raw[:40]!r}")
    for h, (b, d) in zip(hunks, counts, strict=True):
        if len(h.old) != b or len(h.new) != d:
            raise NotRecoverable("the patch's diff does not match its own line counts")
    return hunks


def _apply(hunks: list[_Hunk], lines: list[str], forward: bool) -> list[str]:
    out: list[str] = []
    pos = 0
    for h in hunks:
        start, want, put = (h.old_start, h.old, h.new) if forward else (h.new_start, h.new, h.old)
        idx = start - 1 if want else start
        if idx < pos or lines[idx: idx + len(want)] != want:
            raise NotRecoverable("the file does not hold what the patch wrote (changed after it?)")
        out.extend(lines[pos:idx])
        out.extend(put)
        pos = idx + len(want)
    out.extend(lines[pos:])
    return out


def reverse_update(diff: str, after: str) -> str:
    """The text before an update, checked by applying the diff forward to it again."""
    hunks = parse_hunks(diff)
    after_lines = _lines(after)
    before = _apply(hunks, after_lines, forward=False)
    if _apply(hunks, before, forward=True) != after_lines:
        raise NotRecoverable("the diff applied forward again does not give the file's content")
    return "".join(before)


_UNKNOWN = object()


def pre_edit_states(changes: Iterable[PatchChange], read_now: Callable[[str], FileState]
                    ) -> tuple[dict[str, FileState], dict[str, str]]:
    """Walk a turn's patch changes backwards from the files as they are now.

    Returns each touched path's state before the first change (content None: absent) and the
    paths that are not recoverable, with why. `read_now` raises NotRecoverable for unreadable files.
    """
    state: dict[str, FileState | str] = {}  # a str is why the state is not known

    def now(path: str) -> FileState | str:
        if path not in state:
            try:
                state[path] = read_now(path)
            except NotRecoverable as exc:
                state[path] = str(exc)
        return state[path]

    for ch in reversed(list(changes)):
        if ch.kind == "failed":
            state[ch.path] = "the patch failed part-way; what it wrote is not known"
        elif ch.kind == "add":
            state[ch.path] = FileState(None)  # the patch created it
        elif ch.kind == "delete":
            if "\ufffd" in ch.diff:
                state[ch.path] = "the deleted file was not text the patch could carry"
            else:
                state[ch.path] = FileState(ch.diff.encode(), UNSEEN_MODE, mode_seen=False)
        else:
            dest = ch.move_path or ch.path
            cur = now(dest)
            if isinstance(cur, str):
                state[ch.path] = cur
            elif cur.content is None:
                state[ch.path] = "the patched file is gone now (removed after the patch)"
            else:
                try:
                    before = reverse_update(ch.diff, cur.content.decode("utf-8"))
                    state[ch.path] = FileState(before.encode(), cur.mode, mode_seen=cur.mode_seen)
                except UnicodeDecodeError:
                    state[ch.path] = "the patched file is not UTF-8 text now"
                except NotRecoverable as exc:
                    state[ch.path] = str(exc)
            if ch.move_path and ch.move_path != ch.path:
                state[ch.move_path] = FileState(None)  # the patch moved the file there
    states = {p: s for p, s in state.items() if isinstance(s, FileState)}
    unknown = {p: f"not recoverable: {s}" for p, s in state.items() if isinstance(s, str)}
    return states, unknown


def settle_deleted(states: dict[str, FileState], unknown: dict[str, str],
                   last_seen: Callable[[list[str]], dict[str, tuple[Entry, str]]],
                   twin: Callable[[str, bytes], str | None]) -> dict[str, str]:
    """Give each deleted file the mode and type the newest snapshot or earlier record saw for it.

    Codex's delete carries only the content (a symlink's is its target's). A path last seen as a
    symlink comes back as that symlink; one seen as a file gets the content with the mode seen. A path
    nothing saw is created 0600, unless a file beside it holds exactly its content: then it was likely
    a symlink to that file, and it is left alone (not turned into a copy; the content is not lost).
    Returns {path: how its mode and type were decided}, for the plan.
    """
    unsettled = sorted(p for p, st in states.items() if st.content is not None and not st.mode_seen)
    seen = last_seen(unsettled) if unsettled else {}
    notes: dict[str, str] = {}
    for path in unsettled:
        st = states[path]
        assert st.content is not None
        if path in seen:
            entry, what = seen[path]
            if isinstance(entry, LinkEntry):
                states[path] = FileState(None, link=entry.target)
            elif isinstance(entry, FileEntry):
                states[path] = FileState(st.content, entry.mode)
            notes[path] = SEEN_NOTE.format(what=what)
            continue
        other = twin(path, st.content) if st.content else None
        if other is not None:
            del states[path]
            unknown[path] = (f"not recoverable: its type was never seen and {other} holds exactly its content, "
                             "so it was probably a symlink to that file; left alone rather than made a copy "
                             "(`ln -s` or `cp` that file to bring it back)")
            continue
        notes[path] = UNSEEN_NOTE
    return notes


def sibling_twin(path: str, content: bytes, exclude: Iterable[str]) -> str | None:
    """A regular file in `path`'s directory (not one of `exclude`) holding exactly `content`, if any.

    Read without following symlinks; a directory too large to look through gives None.
    """
    parent = os.path.dirname(path)
    skip = set(exclude) | {path}
    try:
        with os.scandir(parent) as it:
            for n, de in enumerate(it):
                if n >= SIBLING_SCAN:
                    return None
                full = os.path.join(parent, de.name)
                if full in skip or not de.is_file(follow_symlinks=False):
                    continue
                if de.stat(follow_symlinks=False).st_size != len(content):
                    continue
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as f:
                    if f.read(len(content) + 1) == content:
                        return full
    except OSError:
        return None
    return None


def existed_before_turn(turn_diff: str, cwd: str) -> set[str]:
    """Paths Codex's cumulative turn diff shows as present when the turn began (`--- a/...`).

    It catches an `Add File` written over an existing file, which the fileChange item calls an add.
    """
    out = set()
    for line in turn_diff.split("\n"):
        if line.startswith("--- a/"):
            name = line[len("--- a/"):]
            out.add(os.path.realpath(name if os.path.isabs(name) else os.path.join(cwd, name)))
    return out


def read_file_now(fs: SafeRoot, path: str) -> FileState:
    """A file's content and mode, reached from `/` without following any symlink."""
    key = path.lstrip("/")
    try:
        fs.dir_fd(key.rpartition("/")[0], False)  # raises UnsafePath if a symlink stands on the way
        st = fs.lstat(key)
        if st is None:
            return FileState(None)
        if not stat.S_ISREG(st.st_mode):
            raise NotRecoverable("it is not a regular file now")
        if st.st_size > MAX_TEXT_BYTES:
            raise NotRecoverable("it is larger than 64 MiB now")
        return FileState(fs.read(key), stat.S_IMODE(st.st_mode))
    except UnsafePath as exc:
        raise NotRecoverable(f"a symlink stands on its way ({exc})") from exc
    except OSError as exc:
        raise NotRecoverable(f"it cannot be read now ({exc.strerror})") from exc
