"""Matching text in conversations: case-insensitive literal or regex, excerpts, and a byte pre-filter."""

from __future__ import annotations

import json
import re
from typing import Any

from .catalog import HistoryError
from .rollout import Entry

MESSAGE_KINDS = ("user", "agent")
TOOL_KINDS = ("command", "files")


class Matcher:
    """What `history search TEXT` looks for: TEXT anywhere, ignoring case (or a regex with --regex)."""

    def __init__(self, text: str, *, regex: bool = False, tools: bool = False) -> None:
        if not text:
            raise HistoryError("search text is empty")
        try:
            self.rx = re.compile(text if regex else re.escape(text), re.IGNORECASE)
        except re.error as exc:
            raise HistoryError(f"bad --regex pattern {text!r}: {exc}") from exc
        self.text = text
        self.regex = regex
        self.kinds = MESSAGE_KINDS + (TOOL_KINDS if tools else ())
        # A literal ASCII query appears in the rollout's JSON exactly as json.dumps escapes it, so a file
        # whose lower-cased bytes lack that form cannot match: most files are skipped without decoding.
        self.needle: bytes | None = None
        if not regex and text.isascii():
            self.needle = json.dumps(text)[1:-1].lower().encode()
        # The index's trigram phrase query needs 3+ characters; shorter or regex: every digest is checked.
        self.phrase = text if not regex and len(text) >= 3 else None

    def spans(self, entry: Entry) -> list[tuple[str, int, int]]:
        """(field, start, end) of every match in the entry's searchable text."""
        if entry.kind not in self.kinds:
            return []
        out: list[tuple[str, int, int]] = []
        for name, value in (("text", entry.text), ("output", entry.output)):
            if value:
                out.extend((name, m.start(), m.end()) for m in self.rx.finditer(value) if m.end() > m.start())
        return out


class Match:
    """One place in a session where the text was found (a plain class: a dataclass costs ~1 ms at import)."""

    __slots__ = ("at", "end", "excerpt", "inherited_by", "kind", "part", "prompt", "spans", "start")

    def __init__(self, prompt: int, kind: str, at: str, part: str, excerpt: str, start: int, end: int,
                 inherited_by: list[str] | None = None, spans: list[tuple[int, int]] | None = None) -> None:
        self.prompt, self.kind, self.at = prompt, kind, at
        self.part = part  # text or output
        self.excerpt = excerpt
        self.start, self.end = start, end  # of the first match inside `excerpt`
        self.spans = spans if spans is not None else [(start, end)]  # every match the excerpt shows
        self.inherited_by = inherited_by if inherited_by is not None else []

    def as_json(self) -> dict[str, Any]:
        from ..shared.times import json_time

        return {"prompt": self.prompt, "kind": self.kind, "at": json_time(self.at), "field": self.part,
                "excerpt": self.excerpt, "match_start": self.start, "match_end": self.end,
                "spans": [list(s) for s in self.spans], "inherited_by": self.inherited_by}


def excerpt_spans(text: str, spans: list[tuple[int, int]], context: int) -> tuple[str, list[tuple[int, int]]]:
    """One excerpt for all the matches of one message: `context` characters around the first match, stretched over
    the next ones while each starts within 2 x `context` of the one before (so a message is one hit, never one per
    match, and the excerpt stays short); on one line, with … where cut. Returns the matches it shows, in it."""
    spans = sorted(spans)
    shown = [spans[0]]
    for a, b in spans[1:]:
        if a >= shown[-1][1] and a - shown[-1][1] <= 2 * context:
            shown.append((a, b))
        elif a >= shown[-1][1]:
            break
    lo, hi = max(0, shown[0][0] - context), min(len(text), shown[-1][1] + context)
    lead = "…" if lo > 0 else ""
    body = text[lo:hi].replace("\r", " ").replace("\n", " ").replace("\t", " ")
    return lead + body + ("…" if hi < len(text) else ""), [(a - lo + len(lead), b - lo + len(lead)) for a, b in shown]
