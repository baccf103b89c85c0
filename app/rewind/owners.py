"""Whose change a path holds, for a rewind or a redo (issue 34): what changed inside a turn of the thread is the
agent's; what changed between its turns, or after the last one, is the user's (or another session's), and a rewind
keeps it — merged where both changed a file's text, asked (or kept) where they changed the same or adjacent lines.

Why: a restore that took every path back to the pre-turn snapshot also took back the user's own work done between
prompts (a hand-made file deleted, a hand edit reverted) — the complaint most often made of every agent's rewind.
Nothing was lost (the safety snapshot and redo hold it), but it did what those tools do. The rule, from the
snapshots the thread already has (one before and one after each prompt's turn): a path the agent changed in the
undone turns and nobody changed since goes back; a path only the user changed is kept, and the plan says why; a
path both changed is merged (libgit2's merge-file) or, where that cannot be done cleanly, is a conflict the front
end asks about (kept as it is when nobody can be asked). A redo is the same rule the other way round: it puts the
agent's work back and keeps what the user did since the rewind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from snapshot_store import Store
from snapshot_store.ids import digest_hex
from snapshot_store.manifest import ABSENT, Entry, FileEntry, FileMap, is_captured, witnessed_absent
from snapshot_store.restore import DELETE, LEAVE, WRITE, Action
from snapshot_store.safefs import SafeRoot, UnsafePath
from snapshot_store.vocab import RestoreOp

from ..recording.sidecar import TurnRecord

KEPT_YOURS = "kept: changed by you after prompt {m}'s turn"  # or another session: docs/architecture.md
KEPT_SINCE = "kept: changed by you since the rewind"
KEPT_UNKNOWN = "kept: not changed by the agent in a prompt codexr recorded (prompts {first}-{last})"
MERGED = "merged: your changes kept, the agent's of prompt {n} taken back"
MERGED_REDO = "merged: your changes since the rewind kept, the agent's put back"
CONFLICT = "conflict, kept yours: changed by the agent in prompt {n} and by you {when}{why}"

MAX_MERGE_BYTES = 8 << 20  # a side larger than this is a conflict: a merge holds all three in memory


def _held(m: FileMap, p: str) -> Entry | bool | None:
    """What state `m` knows `p` in: its entry (captured), None (witnessed absent), or False (it never looked, or
    saw it without capturing it: unknown)."""
    e = m.get(p)
    if e is not None and is_captured(e):
        return e
    return None if witnessed_absent(m, p) else False


def changed(a: FileMap, b: FileMap) -> set[str]:
    """Paths both states know, whose content (a file's bytes and mode, a link's target, presence) differs. A path
    only one of them looked at is no change: a snapshot that sees more (a file just tracked) did not change it."""
    out = set()
    # Only the entries that differ can hold a change: 0.42 ms against 5.3 ms for two 11,000-path maps of whole
    # `set(a) | set(b)` (bench/bench_owners.py), the same answer on every pair measured.
    for p in {p for p, _e in a.items() ^ b.items()}:
        x, y = _held(a, p), _held(b, p)
        if x is not False and y is not False and x != y:
            out.add(p)
    return out


def _entry(held: Entry | bool | None) -> Entry | None:
    return None if held is None or isinstance(held, bool) else held


@dataclass
class Owners:
    """Who changed what since the prompt a rewind goes back before (or, for a redo, since the rewind)."""

    first: int
    last: int
    agent: dict[str, int] = field(default_factory=dict)  # path -> the last undone prompt whose turn changed it
    left: dict[str, Entry | None] = field(default_factory=dict)  # path -> what the agent's last change left there
    user: dict[str, int] = field(default_factory=dict)  # path -> the prompt after whose turn the user changed it
    redo: bool = False  # a redo's owners: `user` is what changed since the rewind, and unknown paths go ahead

    def when(self, path: str) -> str:
        return "since the rewind" if self.redo else f"after prompt {self.user[path]}'s turn"

    def kept(self, path: str) -> str | None:
        """Why `path` stays as it is now when only one side changed it (None: it is the agent's alone, and goes)."""
        if path in self.agent:
            return None
        if path in self.user:
            return KEPT_SINCE if self.redo else KEPT_YOURS.format(m=self.user[path])
        return None if self.redo else KEPT_UNKNOWN.format(first=self.first, last=self.last)


def owner_rule(store: Store, undone: list[TurnRecord], numbers: Mapping[str, int], first: int, last: int,
               agent_patched: Iterable[str] = (), restored: Iterable[str] = ()) -> Callable[[FileMap], Owners]:
    """For the sidecar's records from prompt `first` on (prompts, the user's `!` commands and queued prompts alike:
    each ran as a turn of the thread), the rule that, given the state now, says who changed each path. `numbers`:
    a record's prompt number (a record between prompts counts with the one before); `agent_patched`: paths the
    agent's patches touched that the snapshots may not hold (their pre-edit states, app/rewind/targets.py). A turn
    without snapshots (a prompt sent without codexr) proves nothing the agent's: what changed across it counts as
    the user's; a queued turn, which has no pre-turn snapshot, starts from the post of the turn before it.
    `restored`: what codexr's own restores since the last turn (files-only rewinds, redos) left, as snapshots: a
    path now as one of them left it is no change of the user's."""
    patched = list(agent_patched)
    restores = [t for t in restored if store.exists(t)]

    def owners(now: FileMap) -> Owners:
        out = Owners(first, last, {p: first for p in patched})
        before: FileMap | None = None
        unfinished: FileMap | None = None  # the pre-turn map of a last turn that has no post-turn snapshot
        number, prev_post = first, None
        for rec in undone:
            number = numbers.get(rec.turn_id, number)
            pre_id = rec.pre or (prev_post if rec.post else None)
            prev_post = rec.post
            if not (pre_id and store.exists(pre_id)):
                before = unfinished = None
                continue
            pre = store.files(pre_id)
            if before is not None:
                out.user.update(dict.fromkeys(changed(before, pre), number - 1))
            if not (rec.post and store.exists(rec.post)):
                before, unfinished = None, pre
                continue
            post = store.files(rec.post)
            for p in changed(pre, post):
                out.agent[p] = number
                out.left[p] = _entry(_held(post, p))
            before, unfinished = post, None
        if unfinished is not None:
            # A turn whose post-turn capture never came (codexr killed while it ran): what changed since its start
            # cannot be told apart, and goes back as before this rule (the safety snapshot keeps it).
            for p in changed(unfinished, now):
                out.agent[p] = number
                out.left[p] = _entry(_held(now, p))
        elif before is not None:
            since = changed(before, now)
            for target in restores:  # codexr put these back itself
                put = store.files(target)
                since = {p for p in since if _held(put, p) is False or _held(put, p) != _held(now, p)}
            out.user.update(dict.fromkeys(since, number))
        return out

    return owners


def redo_rule(store: Store, left_id: str, back_id: str, number: int, since: list[TurnRecord]
              ) -> Callable[[FileMap], Owners]:
    """A redo's owners, the rewind's rule the other way round: what the rewind changed (from what it left, `left_id`,
    to the state before it, `back_id`) is the agent's work the redo puts back, and so is what the agent did in the
    thread's turns since the rewind (`since`: the redo leaves them, as a rewind of them would); what the user changed
    since the rewind, between or after those turns, is kept. A path neither knows changed goes ahead, as before this
    rule (the redo's warning names what changed since)."""

    def owners(now: FileMap) -> Owners:
        left, back = store.files(left_id), store.files(back_id)
        out = Owners(number, number, redo=True)
        for p in changed(left, back):
            out.agent[p] = number
            out.left[p] = _entry(_held(left, p))
        before, prev_post = left, None
        for rec in since:
            pre_id = rec.pre or (prev_post if rec.post else None)
            prev_post = rec.post
            if not (pre_id and rec.post and store.exists(pre_id) and store.exists(rec.post)):
                continue
            pre, post = store.files(pre_id), store.files(rec.post)
            out.user.update(dict.fromkeys(changed(before, pre), number))
            for p in changed(pre, post):
                out.agent[p] = number
                out.left[p] = _entry(_held(post, p))
                out.user.pop(p, None)  # the agent's change came after the user's: what it left is the base
            before = post
        out.user.update(dict.fromkeys(changed(before, now), number))
        return out

    return owners


@dataclass
class Decision:
    """A path the rule decided otherwise than the plain restore: which way, and what that restore would have done
    (the front end's choice can still take it)."""

    kind: str  # "kept" | "merged" | "conflict"
    op: RestoreOp
    target: Entry | None
    reason: str
    text: bytes | None = None  # a merge's result (a dry run stores no blob of it: its diff is shown from this)


def _memory_repo() -> Any:
    """A repository whose objects live in a dict (pygit2's custom odb backend): merge-file needs its three blobs in
    an odb, and a bare repository on disk per merge was ~13 of a merged file's ~16 ms (bench/bench_owners.py, 11,000
    files); this one costs ~0.05 ms and writes nothing."""
    import pygit2

    class Memory(pygit2.OdbBackend):
        def __init__(self) -> None:
            super().__init__()
            self.objs: dict[Any, tuple[int, bytes]] = {}

        def read_cb(self, oid: Any) -> tuple[int, bytes]:
            return self.objs[oid]

        def read_header_cb(self, oid: Any) -> tuple[int, int]:
            kind, data = self.objs[oid]
            return kind, len(data)

        def read_prefix_cb(self, oid: Any) -> Any:
            raise KeyError(oid)

        def exists_cb(self, oid: Any) -> bool:
            return oid in self.objs

        def exists_prefix_cb(self, oid: Any) -> Any:
            raise KeyError(oid)

        def write_cb(self, oid: Any, data: bytes, kind: int) -> None:
            self.objs[oid] = (kind, data)

        def refresh_cb(self) -> None:
            return None

        def __iter__(self) -> Any:
            return iter(self.objs)

    repo = pygit2.Repository()
    odb = pygit2.Odb()
    odb.add_backend(Memory(), 1)
    repo.set_odb(odb)
    return repo


def merge_text(store: Store, base: Entry | None, ours: bytes | None, theirs: Entry | None) -> bytes | str:
    """The three-way merge of a file's text (base: what the agent left; ours: the file now; theirs: what the restore
    puts back), libgit2's merge-file through pygit2 (a well-kept merge: the same hunks as `git merge-file`). The
    merged bytes, or why it cannot be merged cleanly."""
    if not (isinstance(base, FileEntry) and isinstance(theirs, FileEntry) and ours is not None):
        return " (one side is not a file)"
    if max(base.size, len(ours), theirs.size) > MAX_MERGE_BYTES:
        return " (too large to merge)"
    sides = [b"".join(store.blob_chunks(base.blob)), ours, b"".join(store.blob_chunks(theirs.blob))]
    if any(b"\0" in x for x in sides):
        return " (binary)"
    import pygit2

    # pygit2 hands the merged text back as a str decoded as UTF-8, and raises on any other encoding: each side goes
    # in with every byte as the code point of the same value (Latin-1 into UTF-8: the lines compare as the bytes
    # do) and the result comes back the same way, byte for byte.
    wide = [x.decode("latin-1").encode() for x in sides]
    repo = _memory_repo()
    base_e, ours_e, theirs_e = (pygit2.IndexEntry("f", repo.create_blob(x), pygit2.enums.FileMode.BLOB)
                                for x in wide)
    result = repo.merge_file_from_index(base_e, ours_e, theirs_e, use_deprecated=False)
    if not result.automergeable:  # as Git's merge: lines next to each other changed on both sides conflict too
        return " (the same or adjacent lines)"
    return str(result.contents).encode("latin-1")


def decide(store: Store, actions: list[Action], owners: Owners, root: Path, dry_run: bool) -> dict[str, Decision]:
    """Apply the rule to a plan's actions in place: a path only the user changed is left (kept), one both changed is
    merged (its blob stored first, unless `dry_run`) or left as a conflict. What each left or merged path's plain
    restore would have done is returned, for the front end's choices."""
    decided: dict[str, Decision] = {}
    writer = None
    try:
        for a in actions:
            if a.op not in (WRITE, DELETE):
                continue
            plain = Decision("kept", a.op, a.target, a.reason)
            if a.path in owners.agent and a.path in owners.user:
                n = owners.agent[a.path]
                ours = _ours(root, a) if a.op == WRITE else None
                merged = merge_text(store, owners.left.get(a.path), ours, a.target)
                if isinstance(merged, str):
                    a.op, a.reason = LEAVE, CONFLICT.format(n=n, when=owners.when(a.path), why=merged)
                    decided[a.path] = replace(plain, kind="conflict")
                    continue
                if writer is None and not dry_run:
                    writer = store.blob_writer()
                theirs = a.target
                assert isinstance(theirs, FileEntry)
                mode = a.current.mode if isinstance(a.current, FileEntry) else theirs.mode
                blob = writer.add(merged).hex() if writer is not None else digest_hex(merged)
                a.target = FileEntry("f", mode, len(merged), blob)
                a.reason = MERGED_REDO if owners.redo else MERGED.format(n=n)
                decided[a.path] = replace(plain, kind="merged", text=merged)
                continue
            why = owners.kept(a.path)
            if why is not None:
                a.op, a.reason = LEAVE, why
                decided[a.path] = plain
        if writer is not None:
            writer.commit()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return decided


def _ours(root: Path, a: Action) -> bytes | None:
    """The user's side of a merge: the file as the plan's safety capture saw it, read without following a symlink
    (None: it is no regular file there, or it changed since — then the merge is a conflict, and the file stays)."""
    if not isinstance(a.current, FileEntry):
        return None
    try:
        with SafeRoot(str(root)) as fs:
            data = fs.read(a.path)
    except (OSError, UnsafePath):
        return None
    return data if len(data) == a.current.size and digest_hex(data) == a.current.blob else None


def left_map(actions: Iterable[Action], decided: Mapping[str, Decision], beside: Mapping[str, str]
             ) -> dict[str, Entry]:
    """What a restore leaves where the rule or a choice kept or merged a path (laid over its target, this is what
    the restore left: a redo compares against it): the state now for a kept path, the merged text for a merged one,
    and the restored state written beside a kept-both's file."""
    out: dict[str, Entry] = {}
    names = set(beside.values())
    for a in actions:
        if a.path in decided and a.op == LEAVE:
            out[a.path] = a.current if a.current is not None else ABSENT
        elif (a.path in decided or a.path in names) and a.op == WRITE and a.target is not None:
            out[a.path] = a.target
    return out


def conflicts(decided: Mapping[str, Decision]) -> list[str]:
    """The paths a front end asks about."""
    return sorted(p for p, d in decided.items() if d.kind == "conflict")


def merged_texts(decided: Mapping[str, Decision]) -> dict[str, bytes]:
    """A merge's text per path, for a plan's diffs (a dry run's merged blob is in no store)."""
    return {p: d.text for p, d in decided.items() if d.text is not None}
