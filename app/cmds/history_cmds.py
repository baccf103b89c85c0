"""`codexr history …`: list, search, show and export every Codex session on this machine (read-only)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snapshot_store.records import asdict

from ..shared.lines import plural
from .context import Context, UsageError

if TYPE_CHECKING:  # the history modules load in the handlers: every other command skips them (~45 ms)
    from ..history.catalog import Catalog, Session
    from ..history.search import Matcher
    from ..history.store import HistoryStore, SearchResult


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the `history` command group."""
    hist = sub.add_parser("history", help="list, search, show and export Codex conversations across workspaces")
    hist.set_defaults(handler=lambda ctx, args: _group_help(hist))
    hsub = hist.add_subparsers(dest="history_command")

    def cmd(name: str, help_text: str, fn: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = hsub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        p.set_defaults(handler=fn)
        return p

    p = cmd("list", "sessions newest first (this workspace unless --all or --workspace)", _list)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--all", action="store_true", help="every workspace")
    scope.add_argument("--workspace", metavar="DIR", help="the sessions of DIR")
    p.add_argument("-n", type=int, default=20, metavar="N", help="at most N sessions (default 20, 0 = all)")
    p.add_argument("--archived", action="store_true", help="include archived sessions")
    p = cmd("search", "case-insensitive search of every workspace's conversations", _search)
    p.add_argument("text")
    p.add_argument("-n", type=int, default=10, metavar="N", help="at most N sessions (default 10, 0 = all)")
    p.add_argument("--workspace", metavar="DIR", help="only the sessions of DIR")
    p.add_argument("--context", type=int, default=60, metavar="N", help="characters shown around a match")
    p.add_argument("--include", action="append", default=[], choices=["tools"],
                   help="`tools`: also commands, their output and changed file paths")
    p.add_argument("--regex", action="store_true", help="TEXT is a regular expression")
    p.add_argument("--archived", action="store_true", help="include archived sessions")
    p = cmd("show", "print a conversation (a fork with the history it inherited)", _show)
    p.add_argument("id", help="session UUID or a unique prefix of 4+ characters")
    p.add_argument("--prompt", type=int, metavar="N", help="only prompt N")
    p = cmd("export", "write a conversation to a file as Markdown or JSON", _export)
    p.add_argument("id", help="session UUID or a unique prefix of 4+ characters")
    p.add_argument("--format", choices=["md", "json"], default="md")
    p.add_argument("--output", "-o", required=True, metavar="FILE")
    p.add_argument("--force", action="store_true", help="overwrite FILE")


def _group_help(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _open(ctx: Context) -> HistoryStore:
    from ..history.store import HistoryStore

    return HistoryStore(ctx.home)


def _workspace(args: argparse.Namespace, default_here: bool) -> str | None:
    ws = getattr(args, "workspace", None)
    if ws:
        if not os.path.isdir(ws):
            raise UsageError(f"--workspace {ws}: no such directory")
        return os.path.abspath(str(ws))
    if default_here:
        return os.path.abspath(str(getattr(args, "cd", ".") or "."))
    return None


def _n(args: argparse.Namespace) -> int:
    if args.n < 0:
        raise UsageError("-n must be 0 (all) or more")
    return int(args.n)


def _list(ctx: Context, args: argparse.Namespace) -> int:
    from ..history.render import session_json, skipped_note
    from ..history.store import Filter

    flt = Filter(workspace=None if args.all else _workspace(args, True), archived=args.archived)
    n = _n(args)
    store = _open(ctx)
    try:
        cat = store.catalog()
        sessions = sorted((s for s in cat.sessions.values() if flt.keep(s)), key=lambda s: s.mtime_ns, reverse=True)
        shown = sessions if n == 0 else sessions[:n]
        skipped = asdict(cat.skipped)
        from ..services.thread_ids import unique_prefixes

        short = unique_prefixes([s.id for s in shown], cat.sessions)  # as `history show ID` resolves them
        if ctx.json:
            ctx.emit({"scope": {"workspace": flt.workspace, "archived": flt.archived}, "total": len(sessions),
                      "sessions": [{**session_json(s, cat), "id_prefix": short[s.id]} for s in shown],
                      "skipped": skipped})
            return 0
        if not sessions:
            where = f"in {flt.workspace}" if flt.workspace else "in any workspace"
            print(f"no sessions {where} (looked in {', '.join(store.roots(flt))}){skipped_note(skipped)}")
            return 0
        width = max((len(p) for p in short.values()), default=0)
        for s in shown:
            print(_list_line(s, cat, f"{short[s.id]:<{width}}"))
        if len(shown) < len(sessions):
            print(f"… {len(sessions) - len(shown)} more (-n 0 lists all)")
        note = skipped_note(skipped)
        if note:
            print(note.strip(), file=sys.stderr)
        return 0
    finally:
        store.close()


def _list_line(s: Session, cat: Catalog, prefix: str) -> str:
    """One session: its id and the shortest prefix that names it, time, source, prompts, workspace; its label."""
    from ..history.render import session_json, short_time
    from ..services.thread_label import rewound_before, thread_label

    d = session_json(s, cat)
    bits = [s.id, prefix, short_time(d["last_activity"]), s.source_label,
            plural(d["prompts"], "prompt")]
    if d["snapshots"]:
        bits.append(plural(d["snapshots"], "snapshot"))
    if s.archived:
        bits.append("archived")
    origin = s.forked_from
    before = rewound_before(s.sidecar.history, origin) if s.sidecar else None
    label = thread_label(" ".join(d["first_prompt"].split()), d["prompts"], origin, before, 90, s.forked_at)
    return f"{'  '.join(bits)}  {s.cwd}" + (f"\n    {label}" if label else "")


def _highlight(text: str, spans: list[tuple[int, int]], tty: bool) -> str:
    """Every match in the excerpt in bold red on a terminal (plain text otherwise)."""
    if not tty:
        return text
    out, at = [], 0
    for a, b in spans:
        out += [text[at:a], "\x1b[1;31m", text[a:b], "\x1b[0m"]
        at = b
    return "".join(out) + text[at:]


def _search(ctx: Context, args: argparse.Namespace) -> int:
    from ..history.catalog import HistoryError
    from ..history.render import nothing_found, short_time, skipped_note
    from ..history.search import Matcher
    from ..history.store import Filter

    flt = Filter(workspace=_workspace(args, False), archived=args.archived)
    if args.context < 0:
        raise UsageError("--context must be 0 or more")
    try:
        matcher = Matcher(args.text, regex=args.regex, tools="tools" in args.include)
    except HistoryError as exc:
        raise UsageError(str(exc)) from exc
    store = _open(ctx)
    try:
        res = store.search(matcher, flt, _n(args), args.context)
    finally:
        store.close()
    if ctx.json:
        ctx.emit(search_json(args.text, matcher, res))
        return 0
    if not res.hits:
        print(nothing_found(args.text, res, flt.workspace, "tools" in args.include))
        return 0
    tty = sys.stdout.isatty()
    for h in res.hits:
        s = h.session
        label = s.source_label + (", archived" if s.archived else "")
        for m in h.matches:
            also = f" (also in fork {', '.join(m.inherited_by)})" if m.inherited_by else ""
            print(f"{s.id}  {s.cwd}  #{m.prompt}  {short_time(m.at)}  [{label}] {m.kind}: "
                  f"{_highlight(m.excerpt, m.spans, tty)}{also}")
    if res.total_sessions > len(res.hits):
        print(f"… {res.total_sessions - len(res.hits)} more sessions match (-n 0 shows all)")
    note = skipped_note(asdict(res.skipped))
    if note:
        print(note.strip(), file=sys.stderr)
    return 0


def search_json(text: str, matcher: Matcher, res: SearchResult) -> dict[str, Any]:
    """The stable `history search --json` document."""
    from ..shared.times import json_time

    return {
        "query": text, "regex": matcher.regex, "kinds": list(matcher.kinds),
        "results": [{"session_id": h.session.id, "workspace": h.session.cwd, "source": h.session.source,
                     "source_label": h.session.source_label,
                     "archived": h.session.archived, "last_activity": json_time(h.session.last_activity),
                     "matches": [m.as_json() for m in h.matches]} for h in res.hits],
        "total_sessions": res.total_sessions,
        "searched": {"sessions": res.searched_sessions, "roots": res.roots, "index": res.used_index},
        "skipped": asdict(res.skipped),
    }


def _load(ctx: Context, ident: str) -> tuple[HistoryStore, Catalog, Session, Any]:
    from ..history.catalog import HistoryError, conversation

    store = _open(ctx)
    try:
        cat = store.catalog()
        sess = cat.resolve(ident)
    except HistoryError as exc:
        store.close()
        raise UsageError(str(exc)) from exc
    return store, cat, sess, conversation(cat, sess, store.digest)


def _show(ctx: Context, args: argparse.Namespace) -> int:
    from ..history.render import conversation_json, markdown

    store, cat, sess, prompts = _load(ctx, args.id)
    try:
        if args.prompt is not None and not any(p.number == args.prompt for p in prompts):
            raise UsageError(f"prompt {args.prompt} does not exist (session {sess.id} has "
                             f"{plural(max([p.number for p in prompts], default=0), 'prompt')})")
        if ctx.json:
            doc = conversation_json(sess, cat, prompts)
            if args.prompt is not None:
                doc["prompts"] = [p for p in doc["prompts"] if p["number"] == args.prompt]
            ctx.emit(doc)
        else:
            sys.stdout.write(markdown(sess, cat, prompts, args.prompt))
        return 0
    finally:
        store.close()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _export(ctx: Context, args: argparse.Namespace) -> int:
    from ..history.render import conversation_json, markdown

    out = Path(args.output)
    if any(_inside(out, ctx.home / d) for d in ("sessions", "archived_sessions")):
        raise UsageError(f"{out} is among Codex's own files; export elsewhere")
    if out.is_dir():
        raise UsageError(f"{out} is a directory")
    if (out.exists() or out.is_symlink()) and not args.force:
        raise UsageError(f"{out} exists; add --force to overwrite it")
    if not out.parent.is_dir():
        raise UsageError(f"{out.parent} is not a directory")
    import tempfile

    store, cat, sess, prompts = _load(ctx, args.id)
    try:
        if args.format == "json":
            body = json.dumps(conversation_json(sess, cat, prompts), indent=2, ensure_ascii=False) + "\n"
        else:
            body = markdown(sess, cat, prompts)
    finally:
        store.close()
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        if not args.force and (out.exists() or out.is_symlink()):
            raise UsageError(f"{out} exists; add --force to overwrite it")
        os.replace(tmp, out)  # a symlink at FILE is replaced, its target never written
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if ctx.json:
        ctx.emit({"session_id": sess.id, "format": args.format, "output": str(out), "prompts": len(prompts)})
    else:
        print(f"exported session {sess.id} ({plural(len(prompts), 'prompt')}) to {out}")
    return 0
