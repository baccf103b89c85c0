"""`codexr snapshots …`: drive and inspect the snapshot store directly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from snapshot_store import StoreError

from ..shared.lines import human_bytes, over_limit_line, plan_lines, plural, show_path
from .context import Context, UsageError
from .exits import restore_exit
from .picks import add_choice_flags, picks_from

if TYPE_CHECKING:  # the store's modules load in the handler that needs them (start-up: see bench_startup.py)
    from snapshot_store import RestorePlan, Store
    from snapshot_store.manifest import Entry


def when(ts: float) -> str:
    """Local time with its offset, to the second ("?" for a time no calendar holds: a damaged ref says what it
    likes), as every codexr screen shows times (app/shared/times.py)."""
    from ..shared.times import screen_time  # here: only listings format times

    return screen_time(ts, seconds=True)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the `snapshots` command group."""
    snap = sub.add_parser("snapshots", help="capture, inspect and restore workspace snapshots")
    snap.set_defaults(handler=lambda ctx, args: _group_help(snap))
    ssub = snap.add_subparsers(dest="snap_command")

    def cmd(name: str, help_text: str, fn: Any, workspace: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = ssub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        if workspace:
            p.add_argument("-C", "--cd", dest="cd", default=argparse.SUPPRESS, metavar="DIR",
                           help="workspace directory")
        p.set_defaults(handler=fn)
        return p

    p = cmd("capture", "capture the workspace now and print the snapshot id", _capture)
    p.add_argument("--label", help="a note stored with the snapshot")
    p = cmd("list", "list the workspace's snapshots, oldest first", _list)
    p.add_argument("--all", action="store_true", help="every workspace")
    p = cmd("show", "show one snapshot's files", _show, workspace=False)
    p.add_argument("id")
    p = cmd("diff", "per-path changes from ID to ID2, or to the workspace now", _diff)
    p.add_argument("id")
    p.add_argument("id2", nargs="?")
    p = cmd("restore", "restore the workspace to a snapshot (a safety snapshot is taken first)", _restore)
    p.add_argument("id")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("--diff", action="store_true", help="with the plan, show a diff for each file written")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    add_choice_flags(p)
    p.add_argument("--into", metavar="DIR",
                   help="copy a snapshot's files into DIR although it was taken of another directory "
                        "(nothing in DIR is deleted)")
    p = cmd("verify", "check the store; non-zero exit when anything is damaged", _verify, workspace=False)
    p.add_argument("--full", action="store_true", help="also re-read and re-hash every blob and record header")
    p.add_argument("--repair", action="store_true",
                   help="rebuild missing or damaged pack indexes from the packs' own records")
    p = cmd("gc", "drop old snapshots per retention and free unreferenced space", _gc, workspace=False)
    p.add_argument("--dry-run", action="store_true", help="print what would be removed")


def _group_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _capture(ctx: Context, args: argparse.Namespace) -> int:
    ctx.workspace(args.cd)  # not the store, nor Codex's home, nor a directory holding either
    store = ctx.store()
    try:
        res = store.at(args.cd).capture_summary(label=args.label, scope=ctx.scope(), progress=ctx.read_progress)
    finally:
        ctx.done_progress()
    if ctx.json:
        ctx.emit(res.as_json())
    else:
        state = " (no changes since the last snapshot)" if res.unchanged else ""
        print(res.id)
        print(f"{plural(res.file_count, 'file')}, {human_bytes(res.bytes_hashed)} hashed, "
              f"{human_bytes(res.bytes_stored)} stored, {res.seconds:.2f} s{state}", file=sys.stderr)
        from snapshot_store.reasons import Reason

        held = [p for p, why in res.skipped if why.startswith(Reason.OVER_LIMIT)]  # a sample of them (store's)
        for path, reason in res.skipped:
            if not reason.startswith(Reason.OVER_LIMIT):
                print(f"  skipped {show_path(path)}: {reason}", file=sys.stderr)
        if res.over_limit:
            print(f"codexr: {over_limit_line(res.over_limit, res.residue_max_files)}", file=sys.stderr)
            more = res.over_limit - len(held[:3])
            print(f"  e.g. {', '.join(show_path(p) for p in held[:3])}" + (f" and {more:,} more" if more else ""),
                  file=sys.stderr)
    if ctx.auto_gc() and store.auto_gc_due():
        del res  # its per-path stats, and the capture's indexes and listings: not held beside gc's own peak
        store.capturer.release()
        try:
            from snapshot_store.maint.gc import maybe_auto_gc

            maybe_auto_gc(store, ctx.retention())
        except StoreError as exc:
            # The snapshot is committed: a refused auto-gc is reported, not a failed capture.
            print(f"codexr: warning: automatic gc skipped: {exc}", file=sys.stderr)
    return 0


def _list(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    infos = store.list_snapshots(None if args.all else _workspace(args.cd))
    if ctx.json:
        from ..shared.times import json_time

        ctx.emit([{"id": i.id, "root": i.root, "created": json_time(i.created), "kind": i.kind, "label": i.label,
                   "file_count": i.file_count} for i in infos])
        return 0
    if not infos:
        print("no snapshots" + ("" if args.all else f" for {show_path(_workspace(args.cd))}"))
        return 0
    for i in infos:
        where = f"  {show_path(i.root)}" if args.all else ""
        label = f"  {i.label}" if i.label else ""
        print(f"{i.id[:12]}  {when(i.created)}  {i.kind:<8} {plural(i.file_count, 'file'):>12}{label}{where}")
    return 0


def _workspace(path: str) -> str:
    from snapshot_store.roots import resolve_root

    return str(resolve_root(path))


def _show(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    snap = store.resolve(args.id)
    info = store.info(snap)
    files = store.files(snap)
    if ctx.json:
        from ..shared.times import json_time

        ctx.emit({"id": snap, "root": info.root, "created": json_time(info.created), "kind": info.kind,
                  "label": info.label,
                  "entries": [{"path": p, "kind": e.kind, **_entry_json(e)} for p, e in sorted(files.items()) if p]})
        return 0
    print(f"snapshot {snap}\nworkspace {show_path(info.root)}\ncreated {when(info.created)}  kind {info.kind}"
          + (f"  label {info.label}" if info.label else ""))
    for p, e in sorted(files.items()):
        if e.kind == "f":
            print(f"  {e.mode:04o} {e.size:>10}  {e.blob[:12]}  {show_path(p)}")
        elif e.kind == "l":
            print(f"  link {'':>10}  {'':12}  {show_path(p)} -> {show_path(e.target)}")
    seen = sum(1 for e in files.values() if e.kind == "x")
    if seen:
        print(f"  ({seen} more paths seen but not captured; --json lists them with reasons)")
    return 0


def _entry_json(e: Entry) -> dict[str, Any]:
    if e.kind == "f":
        return {"mode": e.mode, "size": e.size, "blob": e.blob}
    if e.kind == "l":
        return {"target": e.target}
    if e.kind == "x" or e.kind == "D":
        return {"reason": e.reason}
    return {}


def _diff(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    a = store.resolve(args.id)
    b = store.resolve(args.id2) if args.id2 else None
    changes = store.diff(a, b) if b else store.at(_workspace(args.cd)).diff(a, scope=ctx.scope())
    if ctx.json:
        ctx.emit({"from": a, "to": b or "workspace", "changes": [{"path": c.path, "change": c.change}
                                                                 for c in changes]})
        return 0
    if not changes:
        print("no differences")
    for c in changes:
        print(f"{c.change:<9} {show_path(c.path)}")
    return 0


def print_plan(store: Store, plan: RestorePlan, with_diff: bool, out: TextIO | None = None) -> None:
    """The preview: what will be written, deleted, left alone, and why (with each file's diff), on `out` (stdout)."""
    after = {}
    if with_diff:
        from ..services.changes import plan_diffs  # the current side from the disk: a dry run stores no blob of it

        diffs = plan_diffs(store, plan)
        after = {path: "\n" + show_path(diff).rstrip("\n") for path, (_st, diff) in diffs.items() if diff}
    for line in plan_lines(plan, after=after):
        print(line, file=out or sys.stdout)


def _restore(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    snap = store.resolve(args.id)
    root = str(ctx.workspace(args.into or args.cd))  # nor a directory holding the store or Codex's home
    into = args.into is not None
    scope = ctx.scope()
    from ..rewind.picks import pick

    picks = picks_from(args, root)

    def narrow(plan: RestorePlan) -> None:
        """--only / --except: the paths not chosen are left alone (the plan says so)."""
        pick(plan.actions, {}, picks, Path(plan.root), "restored", {})

    if args.dry_run:
        res = store.at(root).restore(snap, dry_run=True, scope=scope, into=into)
        narrow(res.plan)
        if ctx.json:
            ctx.emit(res.as_json())
        else:
            print_plan(store, res.plan, args.diff)
        return 0
    if not args.yes and not sys.stdin.isatty():
        raise UsageError("restore changes files: pass --yes to confirm when not on a terminal "
                         "(or --dry-run to preview)")

    declined = False
    from ..recording.workspace_lock import SessionLock  # here: only a restore asks about live sessions

    others = SessionLock(ctx.store_dir, Path(root)).others()

    def confirm(plan: RestorePlan) -> bool:
        nonlocal declined
        narrow(plan)
        ctx.done_progress()
        if others:
            print(f"warning: other codexr sessions are live in this workspace and may lose work to this "
                  f"restore: {'; '.join(others)}", file=sys.stderr)
        if args.yes:
            return True
        print_plan(store, plan, args.diff)
        if not plan.writes and not plan.deletes:
            return False
        try:
            answer = input("Apply this restore? A safety snapshot has been taken. [y/N] ")
        except EOFError:
            answer = ""
        declined = answer.strip().lower() not in ("y", "yes")
        return not declined

    try:
        res = store.at(root).restore(snap, scope=scope, confirm=confirm, progress=ctx.read_progress, into=into)
    finally:
        ctx.done_progress()
    if ctx.json:
        ctx.emit(res.as_json())
        return 1 if declined else restore_exit(res)
    if declined:
        print("restore cancelled; nothing changed")
        return 1
    for path in res.written:
        print(f"wrote   {show_path(path)}")
    for path in res.deleted:
        print(f"deleted {show_path(path)}")
    for a in res.left:
        print(f"left    {show_path(a.path)}  ({a.reason})")
    if res.safety_id:
        print(f"safety snapshot {res.safety_id}  (undo: codexr snapshots restore {res.safety_id[:12]} --yes)")
    return restore_exit(res)


def _verify(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    try:
        from snapshot_store.maint.verify import verify

        report = verify(store, full=args.full, repair=args.repair, retention=ctx.retention(),
                        progress=lambda n, t: ctx.progress(f"verified {n}/{t} blobs"))
    finally:
        ctx.done_progress()
    if ctx.json:
        ctx.emit(report.as_json())
    else:
        for r in report.repaired:
            print(f"repaired: {r}")
        for w in report.warnings:
            print(f"warning: {w}")
        for p in report.problems:
            print(f"damaged: {p}")
        print(f"{'ok' if report.ok else 'DAMAGED'}: {plural(report.packs, 'pack')}, {plural(report.blobs, 'blob')}, "
              f"{plural(report.snapshots, 'snapshot')}, {plural(report.refs, 'ref')} checked"
              + (", every blob re-hashed" if args.full else ""))
    return 0 if report.ok else 1


def _gc(ctx: Context, args: argparse.Namespace) -> int:
    store = ctx.store()
    from snapshot_store.maint.gc import gc

    plan = gc(store, ctx.retention(), dry_run=args.dry_run)
    if ctx.json:
        ctx.emit(plan.as_json())
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {plural(len(plan.dropped), 'snapshot')} by retention, "
          f"{plural(len(plan.delete_snapshots), 'snapshot file')}, "
          f"{plural(len(plan.delete_packs) + len(plan.finish_packs), 'pack')}; "
          f"{'would repack' if args.dry_run else 'repacked'} {len(plan.repack)}; "
          f"{human_bytes(plan.bytes_before)} -> {human_bytes(plan.bytes_after)}")
    if plan.dropped:
        print(f"retention {'would free' if args.dry_run else 'freed'} {human_bytes(plan.freed_by_retention)} "
              f"(what only the {len(plan.dropped)} dropped snapshots used)")
    for pack in plan.rebuilt_indexes:
        print(f"{'would rebuild' if args.dry_run else 'rebuilt'} the index of pack {pack} from its records")
    if plan.interrupted:
        print("finished an interrupted gc" if not args.dry_run else "an interrupted gc is pending; gc finishes it")
    if plan.over_cap:
        print(f"warning: the store stays {human_bytes(plan.over_cap)} over max_store_bytes: the snapshots "
              "retention must keep (newest per workspace, pinned) need that much", file=sys.stderr)
    if plan.missing_blobs:
        print(f"warning: kept snapshots name {plan.missing_blobs} blobs the store does not hold; "
              "run `codexr snapshots verify`", file=sys.stderr)
    return 0

