"""What the front ends' `/history` needs from the history core: hits as flat rows, and one session as text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from snapshot_store.records import asdict

from .catalog import HistoryError, conversation
from .render import markdown, nothing_found, skipped_note
from .search import Matcher
from .store import Filter, HistoryStore, same_dir


@dataclass(frozen=True)
class Hit:
    """One match: which session and prompt, where the session ran, and the excerpt with the match's span."""

    session_id: str
    workspace: str
    prompt: int
    at: str
    kind: str  # user | agent (| command | files)
    excerpt: str
    start: int  # of the match inside `excerpt`
    end: int
    source: str  # codexr, CLI, exec, IDE…
    here: bool  # the session ran in the front end's workspace (so it can be resumed there)
    spans: tuple[tuple[int, int], ...] = ()  # every match inside `excerpt` (start, end is the first)

    def marked(self) -> list[tuple[str, bool]]:
        """The excerpt cut into (text, is a match) pieces, for a front end to style."""
        out: list[tuple[str, bool]] = []
        at = 0
        for a, b in self.spans or ((self.start, self.end),):
            out += [(self.excerpt[at:a], False), (self.excerpt[a:b], True)]
            at = b
        return [*out, (self.excerpt[at:], False)]


@dataclass(frozen=True)
class Found:
    """A search's hits and the one line that says what was searched (or why nothing was found)."""

    hits: list[Hit]
    summary: str


@dataclass(frozen=True)
class Shown:
    """One session rendered for reading, and whether it belongs to the front end's workspace."""

    session_id: str
    workspace: str
    here: bool
    text: str  # Markdown (history show)


OPTIONS = "--regex, --include tools, --archived"
"""What `/history` takes before its text, as `codexr history search` does."""
_OPTION = re.compile(r"\s*(--\S*)(?:\s+|$)")


def parse_query(query: str) -> tuple[str, bool, bool, bool]:
    """`[--regex] [--include tools] [--archived] [--] TEXT` -> (text, regex, tools, archived).

    Raises HistoryError for an option it does not know (one line, as the CLI would say it).
    """
    regex = tools = archived = False
    rest = query
    while (m := _OPTION.match(rest)) is not None:
        word, rest = m.group(1), rest[m.end():]
        if word == "--":
            break
        if word == "--regex":
            regex = True
        elif word == "--archived":
            archived = True
        elif word == "--include":
            parts = rest.split(maxsplit=1)
            if not parts or parts[0] != "tools":
                raise HistoryError("--include takes `tools` (commands, their output and changed files)")
            rest = parts[1] if len(parts) > 1 else ""
            tools = True
        else:
            raise HistoryError(f"unknown option {word} (/history takes {OPTIONS} before the text)")
    return rest.strip(), regex, tools, archived


def search_hits(home: Path, query: str, here: str, *, limit: int = 20, context: int = 50,
                max_hits: int = 200) -> Found:
    """Every workspace's sessions matching `query` (case-insensitive), newest first: `limit` sessions, `max_hits` rows.

    `query` is the text, after any of the CLI's search options (`parse_query`). Raises HistoryError for an empty
    text, a bad regex or an unknown option. Read-only towards Codex's files.
    """
    text, regex, tools, archived = parse_query(query)
    matcher = Matcher(text, regex=regex, tools=tools)
    store = HistoryStore(home)
    try:
        res = store.search(matcher, Filter(archived=archived), limit, context)
    finally:
        store.close()
    if not res.hits:
        return Found([], nothing_found(text, res, None, tools))
    hits = [Hit(h.session.id, h.session.cwd, m.prompt, m.at, m.kind, m.excerpt, m.start, m.end,
                h.session.source_label, same_dir(h.session.cwd, here), tuple(m.spans))
            for h in res.hits for m in h.matches]
    more = res.total_sessions - len(res.hits)
    summary = (f"{len(hits)} hit{'s' if len(hits) != 1 else ''} in {len(res.hits)} of "
               f"{res.searched_sessions} sessions"
               + (f"; {more} more session{'s match' if more != 1 else ' matches'}" if more > 0 else "")
               + (f"; showing the first {max_hits}" if len(hits) > max_hits else "")
               + skipped_note(asdict(res.skipped)))
    return Found(hits[:max_hits], summary)


def show_session(home: Path, ident: str, here: str) -> Shown:
    """A session (UUID or 4+ character prefix) as `history show` prints it; HistoryError for a bad id."""
    store = HistoryStore(home)
    try:
        cat = store.catalog()
        sess = cat.resolve(ident)
        text = markdown(sess, cat, conversation(cat, sess, store.digest))
    finally:
        store.close()
    return Shown(sess.id, sess.cwd, same_dir(sess.cwd, here), text)


def resume_hint(shown: Shown) -> str:
    """How to continue a conversation of another workspace there."""
    import shlex

    where = shlex.quote(shown.workspace) if shown.workspace else "DIR"
    return (f"read-only: this conversation belongs to another workspace ({shown.workspace or 'unknown'}); "
            f"to continue it there: codexr -C {where} resume {shown.session_id}")
