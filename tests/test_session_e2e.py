"""The session core end to end: the real Codex binary, offline, against the scripted Responses server.

One ScriptedModel serves the whole module (every test uses its own prompt triggers); every test gets a
fresh CODEX_HOME and workspace through `RigFactory`.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    Rig,
    RigFactory,
    assert_rollouts_untouched,
    files_only,
    rollout_hashes,
    session_options,
    tree_diff,
    without,
)
from openai_codex.client import CodexClient, CodexConfig
from store_helpers import git

from app.codex.codex_connection import CodexConnection
from app.codex.scripted_model import (
    ScriptedModel,
    add_file,
    delete_file,
    fail,
    message,
    move_file,
    pause,
    shell,
    update_file,
    user_texts,
)
from app.recording.recorder import Recorder
from app.session import ApprovalRequest, Prompt, Session, SessionError
from snapshot_store.manifest import captured_items
from snapshot_store.repository.repo import Repository


def _same_files(rig: Rig, expected: dict[str, Any], *, ignore: tuple[str, ...] = (), what: str = "") -> None:
    now = without(rig.tree(), *ignore)
    exp = without(expected, *ignore)
    assert files_only(now) == files_only(exp), f"{what}: files differ\n{tree_diff(exp, now)}"


def _same_tree(rig: Rig, expected: dict[str, Any], *, ignore: tuple[str, ...] = (), what: str = "") -> None:
    now = without(rig.tree(), *ignore)
    exp = without(expected, *ignore)
    assert now == exp, f"{what}: tree differs (files, dirs, modes)\n{tree_diff(exp, now)}"


def _ids(prompts: list[Prompt]) -> list[tuple[str, str]]:
    return [(p.turn_id, p.text) for p in prompts]


def _captured(rig: Rig, snap: str | None) -> dict[str, Any]:
    assert snap is not None
    return dict(captured_items(rig.session.store.files(snap)))


def _requests_for(model: ScriptedModel, needle: str) -> list[dict[str, Any]]:
    return [r for r in model.model_requests if any(needle in t for t in user_texts(r))]


def _stat_key(p: Path) -> tuple[int, int, int]:
    st = p.stat()
    return st.st_ino, st.st_mtime_ns, st.st_size


# ------------------------------------------------------------------------------------------ 1. capture


def test_patch_and_shell_changes_untracked_note_and_ignored_path(rigs: RigFactory) -> None:
    model = rigs.model
    rig = rigs.make(files={"a.txt": "one\ntwo\nthree\n", "b.txt": "keep me\n", "c.txt": "doomed\n",
                           "gone.txt": "bye\n", "mod.txt": "v1\n", "note.md": "my own note\n",
                           ".codexsnapignore": "ignored/\n*.log\n", "ignored/cache.bin": b"\x00cache",
                           "build.log": "log1\n"})
    model.script("t1-patches", [update_file("a.txt", "two", "TWO"), move_file("b.txt", "sub/b2.txt", "keep me"),
                                delete_file("c.txt"), add_file("d.txt", "dee\n"), message("patched")])
    model.script("t1-shell", [shell("echo made > made.txt && echo v2 >> mod.txt && rm gone.txt && "
                                    "echo log2 >> build.log && echo new > ignored/new.bin"), message("shelled")])
    s = rig.session
    tid = s.start_thread()
    s0 = rig.tree()
    o1 = rig.turn(tid, "t1-patches please")
    assert o1.status == "completed", o1
    assert (rig.ws / "a.txt").read_text() == "one\nTWO\nthree\n" and (rig.ws / "sub/b2.txt").exists()
    assert o1.files_changed == sorted(["a.txt", "b.txt", "sub/b2.txt", "c.txt", "d.txt"])
    rig.write("note.md", "my own note, edited by hand\n")
    s1 = rig.tree()
    o2 = rig.turn(tid, "t1-shell please")
    assert o2.status == "completed", o2
    cmds = [i for i in o2.items if i.get("type") == "commandExecution"]
    assert cmds and cmds[0]["exitCode"] == 0 and cmds[0]["status"] == "completed", cmds
    assert (rig.ws / "made.txt").read_text() == "made\n" and not (rig.ws / "gone.txt").exists()
    # shell edits are not fileChange items: the pre/post snapshots name them (ignored paths are not captured)
    assert o2.files_changed == ["gone.txt", "made.txt", "mod.txt"]
    s2 = rig.tree()
    ignored_stats = {p: _stat_key(rig.ws / p) for p in ("build.log", "ignored/cache.bin", "ignored/new.bin")}

    # outcomes carry both snapshots, and the sidecar binds each turn id to them
    side = s.sidecars.load(tid)
    assert side is not None
    for o in (o1, o2):
        assert o.pre and o.post and o.pre != o.post and o.thread_id == tid
        rec = side.turn(o.turn_id)
        assert rec is not None and (rec.pre, rec.post, rec.status) == (o.pre, o.post, "completed")
    assert {"a.txt", "b.txt", "sub/b2.txt", "c.txt", "d.txt"} <= set(side.agent_touched)
    post2 = _captured(rig, o2.post)
    assert {"made.txt", "mod.txt", "note.md", "a.txt", "d.txt", "sub/b2.txt"} <= set(post2)
    assert not {"gone.txt", "c.txt", "b.txt"} & set(post2)
    assert not [p for p in post2 if p.startswith("ignored/") or p.endswith(".log")], sorted(post2)
    assert not [p for p in _captured(rig, o1.pre) if p.startswith("ignored/") or p.endswith(".log")]

    ign = ("ignored", "build.log")
    r = s.rewind(tid, 2)
    assert r.thread_id != tid and r.prompt == "t1-shell please"
    _same_files(rig, s1, ignore=ign, what="rewind to prompt 2")
    assert {p: _stat_key(rig.ws / p) for p in ignored_stats} == ignored_stats
    red = s.redo(r.thread_id)
    assert red.thread_id == tid
    _same_tree(rig, s2, ignore=ign, what="redo after rewind to 2")
    r = s.rewind(tid, 1, mode="files")
    assert r.thread_id == tid
    _same_files(rig, s0, ignore=(*ign, "note.md"), what="rewind to prompt 1")
    # issue 34: the hand edit made between the two prompts is the user's, and a rewind keeps it
    assert (rig.ws / "note.md").read_text() == "my own note, edited by hand\n"
    assert r.decided["note.md"].kind == "kept", r.decided
    assert {p: _stat_key(rig.ws / p) for p in ignored_stats} == ignored_stats
    s.redo(tid)
    _same_tree(rig, s2, ignore=ign, what="redo after rewind to 1")
    # the ignored paths were never written, deleted or recreated
    assert {p: _stat_key(rig.ws / p) for p in ignored_stats} == ignored_stats
    assert (rig.ws / "build.log").read_text() == "log1\nlog2\n"


def test_git_workspace_tracked_untracked_and_ignored(rigs: RigFactory) -> None:
    model = rigs.model
    rig = rigs.make(git_repo=True, files={"src/app.py": "def f():\n    return 1\n", "README.md": "# readme\n",
                                          ".codexsnapignore": "secret.env\n"})
    rig.write("notes/todo.txt", "untracked idea\n")  # untracked: outside git
    rig.write("secret.env", "TOKEN=1\n")
    index_before = (rig.ws / ".git" / "index").read_bytes()
    head_before = git(rig.ws, "rev-parse", "HEAD")
    model.script("t1g-edit", [update_file("src/app.py", "    return 1", "    return 2"),
                              shell("echo gen > gen.txt && rm README.md && echo more >> notes/todo.txt"),
                              message("edited")])
    model.script("t1g-more", [add_file("docs/new.md", "new doc\n"), shell("echo TOKEN=2 > secret.env"),
                              message("more")])
    model.script("t1g-fork", [add_file("fork.txt", "fork\n"), message("forked")])
    s = rig.session
    tid = s.start_thread()
    s0 = rig.tree()
    o1 = rig.turn(tid, "t1g-edit now")
    # the patch and the shell's changes (gen.txt is untracked by git but captured: not ignored)
    assert o1.status == "completed"
    assert o1.files_changed == ["README.md", "gen.txt", "notes/todo.txt", "src/app.py"]
    assert not (rig.ws / "README.md").exists() and (rig.ws / "gen.txt").exists()
    s1 = rig.tree()
    o2 = rig.turn(tid, "t1g-more now")
    assert o2.status == "completed" and o2.files_changed == ["docs/new.md"]
    s2 = rig.tree()
    secret = _stat_key(rig.ws / "secret.env")
    assert "secret.env" not in _captured(rig, o2.post)
    assert "notes/todo.txt" in _captured(rig, o1.pre) and "notes/todo.txt" in _captured(rig, o1.post)

    r = s.rewind(tid, 1)
    _same_files(rig, s0, ignore=("secret.env",), what="rewind to 1 in a git repo")
    assert (rig.ws / "README.md").read_text() == "# readme\n"
    assert (rig.ws / "notes/todo.txt").read_text() == "untracked idea\n"
    assert _stat_key(rig.ws / "secret.env") == secret
    assert (rig.ws / ".git" / "index").read_bytes() == index_before
    fork = rig.turn(r.thread_id, "t1g-fork now")  # (a new thread has no rollout before its first turn)
    assert fork.status == "completed" and (rig.ws / "fork.txt").exists()
    s.redo(r.thread_id)
    _same_tree(rig, s2, ignore=("secret.env",), what="redo in a git repo")
    r = s.rewind(tid, 2)
    _same_files(rig, s1, ignore=("secret.env",), what="rewind to 2 in a git repo")
    s.redo(r.thread_id)
    _same_tree(rig, s2, ignore=("secret.env",), what="second redo in a git repo")
    assert _stat_key(rig.ws / "secret.env") == secret and (rig.ws / "secret.env").read_text() == "TOKEN=2\n"
    assert (rig.ws / ".git" / "index").read_bytes() == index_before
    assert git(rig.ws, "rev-parse", "HEAD") == head_before


# ------------------------------------------------------------------------------------------ 2. rewind


def _three_prompts(rig: Rig, tag: str) -> tuple[str, list[str], list[dict[str, Any]], list[Any]]:
    """Three turns that each change files; returns thread, prompt texts, the tree before each turn + final."""
    model = rig.model
    model.script(f"{tag}-p1", [add_file("one.txt", "1\n"), shell("echo s1 > shell1.txt"), message("p1 done")])
    model.script(f"{tag}-p2", [update_file("one.txt", "1", "one"), shell("echo s2 >> shell1.txt && rm base.txt"),
                               message("p2 done")])
    model.script(f"{tag}-p3", [add_file("deep/three.txt", "3\n"), delete_file("one.txt"),
                               shell("mkdir -p made/gen && echo r > made/gen/report.txt"), message("p3 done")])
    rig.write("base.txt", "base\n")
    tid = rig.session.start_thread()
    texts = [f"{tag}-p1 first prompt", f"{tag}-p2 second prompt", f"{tag}-p3 third prompt"]
    trees, outcomes = [], []
    for text in texts:
        trees.append(rig.tree())
        o = rig.turn(tid, text)
        assert o.status == "completed", o
        outcomes.append(o)
    trees.append(rig.tree())
    return tid, texts, trees, outcomes


def test_rewind_to_first_prompt_starts_an_empty_thread(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, texts, trees, _ = _three_prompts(rig, "t2a")
    before = _ids(s.prompts(tid))
    r = s.rewind(tid, 1)
    assert r.thread_id != tid and r.origin_thread == tid and r.to_prompt == 1 and r.prompt == texts[0]
    _same_files(rig, trees[0], what="rewind to prompt 1")
    assert _ids(s.prompts(tid)) == before
    assert s.prompts(r.thread_id) == []  # a new thread with no turns


def test_rewind_to_first_prompt_then_redo(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, _texts, trees, _ = _three_prompts(rig, "t2b")
    r = s.rewind(tid, 1)
    _same_files(rig, trees[0], what="rewind to prompt 1")
    red = s.redo(r.thread_id)  # straight back, no turn on the new thread
    assert red.thread_id == tid and red.turns_since_rewind == 0
    _same_tree(rig, trees[3], what="redo of a rewind to prompt 1")


def test_rewind_to_first_prompt_then_turn_sees_only_the_new_prompt(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    tid, texts, trees, _ = _three_prompts(rig, "t2c")
    r = s.rewind(tid, 1)
    o = rig.turn(r.thread_id, "t2c-fresh start over")
    assert o.status == "completed"
    (req,) = _requests_for(model, "t2c-fresh")
    assert user_texts(req) == ["t2c-fresh start over"]
    assert [p.text for p in s.prompts(r.thread_id)] == ["t2c-fresh start over"]
    red = s.redo(r.thread_id)
    assert red.thread_id == tid and red.turns_since_rewind == 1
    _same_tree(rig, trees[3], what="redo")
    assert [p.text for p in s.prompts(tid)] == texts


def test_rewind_to_later_prompts_forks_before_them(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    tid, texts, trees, outcomes = _three_prompts(rig, "t2d")
    original = s.prompts(tid)
    assert _ids(original) == [(o.turn_id, t) for o, t in zip(outcomes, texts, strict=True)]
    assert [p.pre for p in original] == [o.pre for o in outcomes]
    for k in (3, 2):
        r = s.rewind(tid, k)
        assert r.prompt == texts[k - 1] and r.to_prompt == k and r.origin_thread == tid and r.mode == "both"
        fork = s.prompts(r.thread_id)
        assert _ids(fork) == _ids(original[: k - 1])
        assert [p.pre for p in fork] == [p.pre for p in original[: k - 1]]  # fork sidecar keeps the snapshots
        _same_files(rig, trees[k - 1], what=f"rewind to prompt {k}")
        o = rig.turn(r.thread_id, f"t2d-next after rewind to {k}")
        assert o.status == "completed"
        (req,) = _requests_for(model, f"t2d-next after rewind to {k}")
        assert user_texts(req) == [*texts[: k - 1], f"t2d-next after rewind to {k}"]
        red = s.redo(r.thread_id)
        assert red.thread_id == tid
        _same_tree(rig, trees[3], what=f"redo of rewind to {k}")
        assert _ids(s.prompts(tid)) == _ids(original)
    # by turn id too
    r = s.rewind(tid, outcomes[1].turn_id)
    assert r.to_prompt == 2 and r.prompt == texts[1]
    _same_files(rig, trees[1], what="rewind by turn id")


# ------------------------------------------------------------------------------------------ 3. redo


def test_rewind_redo_round_trip_is_exact_including_modes(rigs: RigFactory) -> None:
    rig = rigs.make(files={"run.sh": "#!/bin/sh\necho hi\n", "private.txt": "p\n", "data.bin": bytes(range(256))})
    os.chmod(rig.ws / "private.txt", 0o600)
    model, s = rig.model, rig.session
    model.script("t3-a", [update_file("run.sh", "echo hi", "echo hello"), message("a")])
    model.script("t3-b", [shell("chmod +x run.sh && chmod 640 private.txt && printf 'x\\000y' > bin2.dat"),
                          add_file("lib/mod.py", "X = 1\n"), message("b")])
    model.script("t3-c", [shell("chmod 600 run.sh && echo tail >> private.txt && rm data.bin"), message("c")])
    tid = s.start_thread()
    trees = []
    for text in ("t3-a go", "t3-b go", "t3-c go"):
        trees.append(rig.tree())
        assert rig.turn(tid, text).status == "completed"
    final = rig.tree()
    assert final["run.sh"][2] == 0o600 and final["private.txt"][2] == 0o640 and "data.bin" not in final
    original = _ids(s.prompts(tid))
    # (prompt 1 with mode "both" is covered by test_rewind_to_first_prompt_then_redo)
    for k, mode in ((3, "both"), (2, "both"), (1, "files"), (2, "files")):
        r = s.rewind(tid, k, mode=mode)
        _same_files(rig, trees[k - 1], what=f"rewind to {k} ({mode})")
        red = s.redo(r.thread_id)
        assert red.thread_id == tid and red.from_thread == r.thread_id
        _same_tree(rig, final, what=f"redo of rewind to {k} ({mode})")
        assert _ids(s.prompts(tid)) == original
    assert trees[1]["run.sh"][2] == 0o644 and trees[2]["run.sh"][2] == 0o755


# ------------------------------------------------------------------------------------------ 4. redo after fork turns


def test_redo_after_turns_on_the_fork_keeps_the_fork_state(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    tid, texts, trees, _ = _three_prompts(rig, "t4")
    model.script("t4-fork1", [add_file("forked.txt", "fork\n"), shell("echo f >> shell1.txt"), message("f1")])
    model.script("t4-fork2", [update_file("forked.txt", "fork", "fork two"), message("f2")])
    r = s.rewind(tid, 2)
    assert rig.turn(r.thread_id, "t4-fork1 go").status == "completed"
    assert rig.turn(r.thread_id, "t4-fork2 go").status == "completed"
    fork_tree = rig.tree()
    assert [p.text for p in s.prompts(r.thread_id)] == [texts[0], "t4-fork1 go", "t4-fork2 go"]
    red = s.redo(r.thread_id)
    assert red.turns_since_rewind == 2 and red.thread_id == tid
    assert {"forked.txt", "shell1.txt"} <= set(red.changed_since_rewind), red.changed_since_rewind
    _same_tree(rig, trees[3], what="redo")
    assert red.safety_id
    s.store.at(rig.ws).restore(red.safety_id, scope=s.scope)
    _same_tree(rig, fork_tree, what="restoring redo's safety snapshot")


# ------------------------------------------------------------------------------------------ 5. three and three


def test_three_rewinds_on_forks_then_three_redos_retrace(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    model.script("t5a-p4", [add_file("four.txt", "4\n"), shell("echo 4 >> shell1.txt"), message("p4")])
    tid, texts, trees, _ = _three_prompts(rig, "t5a")
    trees.pop()
    texts.append("t5a-p4 fourth prompt")
    trees.append(rig.tree())
    assert rig.turn(tid, texts[3]).status == "completed"
    trees.append(rig.tree())
    threads = [tid]
    prompts = {tid: _ids(s.prompts(tid))}
    for k in (4, 3, 2):
        r = s.rewind(threads[-1], k)
        threads.append(r.thread_id)
        prompts[r.thread_id] = _ids(s.prompts(r.thread_id))
        assert prompts[r.thread_id] == prompts[tid][: k - 1]
        _same_files(rig, trees[k - 1], what=f"rewind to {k}")
    assert len(set(threads)) == 4
    for k, dest in zip((2, 3, 4), reversed(threads[:-1]), strict=True):
        red = s.redo(threads.pop())
        assert red.thread_id == dest == threads[-1]
        _same_tree(rig, trees[k], what=f"redo back to {dest}")
        assert _ids(s.prompts(dest)) == prompts[dest]
    with pytest.raises(SessionError):
        s.redo(tid)


def test_three_files_only_rewinds_then_three_redos_retrace(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, _texts, trees, _ = _three_prompts(rig, "t5b")
    original = _ids(s.prompts(tid))
    for k in (3, 2, 1):
        r = s.rewind(tid, k, mode="files")
        assert r.thread_id == tid and r.mode == "files"
        _same_files(rig, trees[k - 1], what=f"files-only rewind to {k}")
        assert _ids(s.prompts(tid)) == original
    for k in (1, 2, 3):
        red = s.redo(tid)
        assert red.thread_id == tid and red.mode == "files"
        _same_tree(rig, trees[k], what=f"redo #{k}")
        assert _ids(s.prompts(tid)) == original
    with pytest.raises(SessionError):
        s.redo(tid)


# ------------------------------------------------------------------------------------------ 6. modes


def test_files_only_and_conversation_only_modes_and_their_redos(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    tid, texts, trees, _ = _three_prompts(rig, "t6")
    original = _ids(s.prompts(tid))
    threads_before = rig.thread_ids()

    r = s.rewind(tid, 2, mode="files")
    assert (r.thread_id, r.mode, r.prompt) == (tid, "files", texts[1]) and r.safety_id
    _same_files(rig, trees[1], what="files-only rewind")
    assert _ids(s.prompts(tid)) == original and rig.thread_ids() == threads_before
    red = s.redo(tid)
    assert red.thread_id == tid and red.mode == "files" and red.turns_since_rewind == 0
    _same_tree(rig, trees[3], what="files-only redo")
    assert _ids(s.prompts(tid)) == original

    r = s.rewind(tid, 2, mode="conversation")
    assert r.thread_id != tid and r.mode == "conversation" and r.safety_id is None and r.restore is None
    _same_tree(rig, trees[3], what="conversation-only rewind leaves files")
    assert _ids(s.prompts(r.thread_id)) == original[:1]
    o = rig.turn(r.thread_id, "t6-conv after conversation rewind")
    assert o.status == "completed"
    (req,) = _requests_for(model, "t6-conv after")
    assert user_texts(req) == [texts[0], "t6-conv after conversation rewind"]
    red = s.redo(r.thread_id)
    assert red.thread_id == tid and red.mode == "conversation" and red.safety_id is None
    assert red.turns_since_rewind == 1
    _same_tree(rig, trees[3], what="conversation-only redo leaves files")
    assert _ids(s.prompts(tid)) == original


# ------------------------------------------------------------------------------------------ 7. shell-made files


def test_shell_created_file_removed_by_rewind_and_back_after_redo(rigs: RigFactory) -> None:
    rig = rigs.make(files={"keep.txt": "k\n"})
    model, s = rig.model, rig.session
    model.script("t7-first", [message("nothing yet")])
    model.script("t7-make", [shell("mkdir -p gen/sub && echo generated > gen/sub/made.txt && echo top > top.txt"),
                             message("made")])
    tid = s.start_thread()
    first = rig.turn(tid, "t7-first hello")
    assert first.status == "completed"
    listed = s.store.list_snapshots(rig.ws)
    before = rig.tree()
    o = rig.turn(tid, "t7-make files")
    assert o.status == "completed" and o.files_changed == ["gen/sub/made.txt", "top.txt"]
    # A turn that left the files alone, and the prompt after it, are bound to the snapshot already holding them:
    # Enter waits for no write (the rewind below restores from it all the same).
    assert first.pre and first.post == first.pre == o.pre and o.post != o.pre
    assert [i.id for i in s.store.list_snapshots(rig.ws)] == [*(i.id for i in listed), o.post]
    after = rig.tree()
    assert (rig.ws / "gen/sub/made.txt").read_text() == "generated\n"
    r = s.rewind(tid, 2)
    assert not (rig.ws / "gen/sub/made.txt").exists() and not (rig.ws / "top.txt").exists()
    _same_files(rig, before, what="rewind removes shell-made files")
    assert r.restore is not None and {"gen/sub/made.txt", "top.txt"} <= set(r.restore.deleted)
    _same_tree(rig, before, what="rewind also removes the directories the shell made")
    s.redo(r.thread_id)
    _same_tree(rig, after, what="redo brings shell-made files back")


# ------------------------------------------------------------------------------------------ 8. manual edits


def test_manual_edits_between_turns_survive_rewind_and_redo(rigs: RigFactory) -> None:
    """Issue 34: what the user changed between or after the agent's turns is kept by a rewind (merged where the
    agent changed other lines of the same file, a conflict kept as it is where it changed the same or adjacent
    ones), and a redo keeps what the user did after the rewind the same way."""
    rig = rigs.make(files={"b.txt": "b\nb2\nb3\nb4\n"})
    model, s = rig.model, rig.session
    model.script("t8-one", [add_file("a.txt", "agent a\n"), message("one")])
    model.script("t8-two", [update_file("b.txt", "b", "agent b"), message("two")])
    tid = s.start_thread()
    assert rig.turn(tid, "t8-one go").status == "completed"
    rig.write("a.txt", "agent a\nhand edit\n")
    rig.write("manual.txt", "typed by the user\n")
    pre2 = rig.tree()
    assert rig.turn(tid, "t8-two go").status == "completed"
    rig.write("b.txt", "agent b\nb2\nb3\nb4\nhand edit after turn 2\n")
    final = rig.tree()

    r = s.rewind(tid, 2)  # the agent's line goes back, the user's line after the turn stays: merged
    assert r.decided["b.txt"].kind == "merged", r.decided
    _same_files(rig, {**pre2, "b.txt": ("file", b"b\nb2\nb3\nb4\nhand edit after turn 2\n", 0o644)},
                what="rewind to 2")
    s.redo(r.thread_id)  # and the redo merges the agent's line back in
    _same_tree(rig, final, what="redo brings the agent's line back beside the user's")

    r = s.rewind(tid, 1)
    # the agent made a.txt and the user edited it: a conflict, kept as it is; manual.txt is the user's alone
    assert r.decided["a.txt"].kind == "conflict" and r.decided["manual.txt"].kind == "kept", r.decided
    assert (rig.ws / "a.txt").read_text() == "agent a\nhand edit\n"
    assert (rig.ws / "manual.txt").read_text() == "typed by the user\n"
    assert (rig.ws / "b.txt").read_text() == "b\nb2\nb3\nb4\nhand edit after turn 2\n"
    # after the rewind the user edits again: a redo keeps that, and its safety capture holds it too
    rig.write("later.txt", "new after the rewind\n")
    rig.write("manual.txt", "typed by the user, then again\n")
    after_rewind_edit = rig.tree()
    fork_turn = rig.turn(r.thread_id, "t8-chat about it")  # a fork with a rollout, so redo can read it
    assert fork_turn.status == "completed"
    red = s.redo(r.thread_id)
    assert red.changed_since_rewind == [], red.changed_since_rewind  # nothing of the user's overwritten
    assert red.decided["later.txt"].kind == "kept" and red.decided["manual.txt"].kind == "kept", red.decided
    _same_tree(rig, {**final, "later.txt": ("file", b"new after the rewind\n", 0o644),
                     "manual.txt": ("file", b"typed by the user, then again\n", 0o644)},
               what="redo after a manual edit on the rewound state")
    assert red.safety_id
    s.store.at(rig.ws).restore(red.safety_id, scope=s.scope)
    _same_tree(rig, after_rewind_edit, what="redo's safety snapshot holds the post-rewind manual edits")


# ------------------------------------------------------------------------------------------ 9. rollouts


def test_codexr_never_writes_codex_rollout_files(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, _texts, _trees, _ = _three_prompts(rig, "t9")
    home = rig.home
    h = rollout_hashes(home)
    assert h, "Codex wrote no rollout?"
    s.store.at(rig.ws).capture(label="manual capture", scope=s.scope)
    s.rewind(tid, 2, dry_run=True)
    assert rollout_hashes(home) == h, "store capture / dry-run rewind touched sessions/"

    s.rewind(tid, 2, mode="files")
    assert rollout_hashes(home) == h, "files-only rewind touched sessions/"
    s.redo(tid)
    assert rollout_hashes(home) == h, "files-only redo touched sessions/"

    r = s.rewind(tid, 3)
    new = assert_rollouts_untouched(h, rollout_hashes(home), "rewind")
    assert all(r.thread_id in p for p in new), new
    h = rollout_hashes(home)
    s.redo(r.thread_id)
    assert_rollouts_untouched(h, rollout_hashes(home), "redo")
    h = rollout_hashes(home)
    r = s.rewind(tid, 2, mode="conversation")
    assert_rollouts_untouched(h, rollout_hashes(home), "conversation-only rewind")
    h = rollout_hashes(home)
    s.redo(r.thread_id)
    assert_rollouts_untouched(h, rollout_hashes(home), "conversation-only redo")
    # codexr's own data lives elsewhere
    assert (home / "file_snapshots" / "refs" / "threads" / f"{tid}.json").exists()


# ------------------------------------------------------------------------------------------ 10. plain Codex reads it


def test_plain_codex_reads_codexr_threads(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, texts, _trees, outcomes = _three_prompts(rig, "t10")
    r = s.rewind(tid, 3)
    fork_turn = rig.turn(r.thread_id, "t10-fork prompt")
    codex = s.connection.client._proc
    assert codex is not None and codex.poll() is None
    s.close()
    assert codex.returncode is not None, "close returned before Codex had ended"  # what it wrote is all there
    client = CodexClient(CodexConfig(cwd=str(rig.ws), env=rig.env))
    try:
        client.start()
        client.initialize()
        got = client.thread_read(tid, include_turns=True).thread
        turns = [t.model_dump(by_alias=True, mode="json") for t in got.turns or []]
        assert [t["id"] for t in turns] == [o.turn_id for o in outcomes]
        assert [t["status"] for t in turns] == ["completed"] * 3
        firsts = [next(i for i in t["items"] if i["type"] == "userMessage") for t in turns]
        assert [i["content"][0]["text"] for i in firsts] == texts
        fork = client.thread_read(r.thread_id, include_turns=True).thread
        assert [t.id for t in fork.turns or []] == [outcomes[0].turn_id, outcomes[1].turn_id, fork_turn.turn_id]
        assert fork.forked_from_id == tid
    finally:
        client.close()


# ------------------------------------------------------------------------------------------ 11. approvals


def test_approvals_accept_decline_raise_timeout_cancel(rigs: RigFactory) -> None:
    asked: list[ApprovalRequest] = []

    def decide(req: ApprovalRequest) -> str:
        asked.append(req)
        cmd = req.command or ""
        if "slow" in cmd and not any("slow" in (a.command or "") for a in asked[:-1]):
            time.sleep(3.0)
            return "accept"
        if "raise" in cmd:
            raise RuntimeError("the UI blew up")
        for word in ("accept", "decline", "cancel"):
            if word in cmd:
                return word
        return "decline"

    rig = rigs.make(approval=decide, approval_policy="untrusted",
                    config_extra="[file_snapshots]\napproval_timeout_seconds = 0.5")
    model, s = rig.model, rig.session
    assert s._approval_timeout == 0.5
    for word in ("accept", "decline", "raise", "slow", "cancel", "accept2"):
        model.script(f"t11-{word}", [shell(f"echo {word} > {word}.txt"), message(f"after {word}")])
    tid = s.start_thread()

    def cmd_items(o: Any) -> list[dict[str, Any]]:
        return [i for i in o.items if i.get("type") == "commandExecution"]

    o = rig.turn(tid, "t11-accept it")
    assert o.status == "completed" and (rig.ws / "accept.txt").read_text() == "accept\n"
    assert cmd_items(o)[0]["status"] == "completed"
    assert asked[-1].kind == "command" and asked[-1].thread_id == tid and asked[-1].turn_id == o.turn_id
    assert "accept.txt" in (asked[-1].command or "") and asked[-1].item_id == cmd_items(o)[0]["id"]

    o = rig.turn(tid, "t11-decline it")
    assert o.status == "completed" and not (rig.ws / "decline.txt").exists()
    assert cmd_items(o)[0]["status"] == "declined" and o.final_message == "after decline"

    o = rig.turn(tid, "t11-raise it")
    assert o.status == "completed" and not (rig.ws / "raise.txt").exists()
    assert cmd_items(o)[0]["status"] == "declined"

    events: list[tuple[str, dict[str, Any]]] = []
    o = rig.turn(tid, "t11-cancel it", on_event=lambda m, p: events.append((m, p)))
    assert o.status == "interrupted" and not (rig.ws / "cancel.txt").exists()
    assert o.pre and o.post and s.store.files(o.post) is not None
    side = s.sidecars.load(tid)
    assert side is not None
    rec = side.turn(o.turn_id)
    assert rec is not None and (rec.pre, rec.post, rec.status) == (o.pre, o.post, "interrupted")
    started_ids = {p["item"]["id"] for m, p in events if m == "item/started"}
    assert started_ids <= {p["item"]["id"] for m, p in events if m == "item/completed"}
    assert cmd_items(o)[0]["status"] == "declined"  # Codex itself completes a cancelled command as declined
    assert o.final_message == ""

    started = time.monotonic()
    o = rig.turn(tid, "t11-slow it")
    assert o.status == "completed" and cmd_items(o)[0]["status"] == "declined"
    assert time.monotonic() - started < 2.5, "the turn waited for the slow callback"
    assert any(m == "approvalTimedOut" for m, _ in rig.notices)
    assert not (rig.ws / "slow.txt").exists()
    # nothing is wedged: RPCs still work ...
    assert [p.status for p in s.prompts(tid)] == ["completed"] * 3 + ["interrupted", "completed"]
    assert tid in rig.thread_ids()
    # ... and so does the next approval, even while the timed-out callback is still running
    o = rig.turn(tid, "t11-accept2 it")
    assert o.status == "completed"
    assert cmd_items(o)[0]["status"] == "completed", (
        "approval after a timed-out one was declined: the timed-out callback still holds the only approval worker")
    assert (rig.ws / "accept2.txt").read_text() == "accept2\n"


# ------------------------------------------------------------------------------------------ 12. interrupt


def test_interrupted_turn_closes_dangling_items_and_is_snapshotted(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    model.script("t12-sleepy", [add_file("early.txt", "e\n"), shell("sleep 8"), message("too late")])
    model.script("t12-slowmodel", [pause(8), message("too late")])
    tid = s.start_thread()

    def run_interrupted(text: str, trigger: tuple[str, str]) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
        events: list[tuple[str, dict[str, Any]]] = []

        def on_event(method: str, payload: dict[str, Any]) -> None:
            events.append((method, payload))
            item = payload.get("item") or {}
            if (method, item.get("type")) == trigger and not payload.get("synthetic"):
                threading.Thread(target=s.interrupt, args=(tid, payload["turnId"]), daemon=True).start()

        started = time.monotonic()
        o = rig.turn(tid, text, on_event=on_event)
        assert time.monotonic() - started < 6, "interrupt did not stop the turn"
        return o, events

    o, events = run_interrupted("t12-sleepy go", ("item/started", "commandExecution"))
    assert o.status == "interrupted" and o.pre and o.post
    assert "early.txt" in _captured(rig, o.post) and o.files_changed == ["early.txt"]
    started_ids = {p["item"]["id"] for m, p in events if m == "item/started"}
    completed_ids = {p["item"]["id"] for m, p in events if m == "item/completed"}
    assert started_ids <= completed_ids, "a started item never completed"
    synthetic = [p["item"] for m, p in events if m == "item/completed" and p.get("synthetic")]
    assert [(i["type"], i["status"]) for i in synthetic] == [("commandExecution", "interrupted")]
    assert synthetic[0] in o.items

    o2, _ = run_interrupted("t12-slowmodel go", ("item/completed", "userMessage"))
    assert o2.status == "interrupted" and o2.post
    side = s.sidecars.load(tid)
    assert side is not None
    assert [(t.status, bool(t.pre), bool(t.post)) for t in side.turns] == [("interrupted", True, True)] * 2
    # the thread still works, and a rewind to the interrupted prompt restores its pre state
    assert rig.turn(tid, "t12-after plain").status == "completed"
    r = s.rewind(tid, 1)
    assert not (rig.ws / "early.txt").exists() and s.prompts(tid)[0].status == "interrupted"
    assert r.prompt == "t12-sleepy go"


# ------------------------------------------------------------------------------------------ 13. provider failure


def test_provider_failure_mid_turn(rigs: RigFactory) -> None:
    rig = rigs.make()
    model, s = rig.model, rig.session
    model.script("t13-ok", [add_file("ok.txt", "ok\n"), message("fine")])
    model.script("t13-boom", [add_file("half.txt", "half done\n"), fail(500)])
    tid = s.start_thread()
    assert rig.turn(tid, "t13-ok first").status == "completed"
    pre = rig.tree()
    o = rig.turn(tid, "t13-boom second")
    assert o.status == "failed" and o.error, o
    assert o.files_changed == ["half.txt"] and (rig.ws / "half.txt").exists()
    assert "half.txt" in _captured(rig, o.post) and "half.txt" not in _captured(rig, o.pre)
    prompts = s.prompts(tid)
    assert [p.status for p in prompts] == ["completed", "failed"]
    r = s.rewind(tid, 2)
    assert r.prompt == "t13-boom second"
    _same_files(rig, pre, what="rewind to the failed prompt")
    s.redo(r.thread_id)
    assert (rig.ws / "half.txt").read_text() == "half done\n"


# ------------------------------------------------------------------------------------------ 14. tracking off


def test_tracking_off(rigs: RigFactory) -> None:
    rig = rigs.make(config_extra="[features]\nfile_snapshots = false")
    model, s = rig.model, rig.session
    assert s.tracking is False
    model.script("t14-a", [add_file("a.txt", "a\n"), message("a")])
    model.script("t14-b", [add_file("b.txt", "b\n"), message("b")])
    tid = s.start_thread()
    o1 = rig.turn(tid, "t14-a go")
    o2 = rig.turn(tid, "t14-b go")
    assert (o1.pre, o1.post, o2.pre, o2.post) == (None, None, None, None)
    assert o2.files_changed == ["b.txt"]
    assert s.store.list_snapshots() == []
    files = rig.tree()
    threads = rig.thread_ids()
    for mode in ("both", "files"):
        with pytest.raises(SessionError) as exc:
            s.rewind(tid, 2, mode=mode)
        assert "--conversation-only" in str(exc.value) and "\n" not in str(exc.value)
    assert rig.thread_ids() == threads and rig.tree() == files
    r = s.rewind(tid, 2, mode="conversation")
    assert r.thread_id != tid and [p.turn_id for p in s.prompts(r.thread_id)] == [o1.turn_id]
    assert rig.tree() == files
    red = s.redo(r.thread_id)
    assert red.thread_id == tid and rig.tree() == files
    assert s.store.list_snapshots() == []


# ------------------------------------------------------------------------------------------ 15. errors


def test_errors_change_nothing(rigs: RigFactory) -> None:
    rig = rigs.make()
    s = rig.session
    tid, texts, _trees, _ = _three_prompts(rig, "t15")
    files = rig.tree()
    threads = rig.thread_ids()
    side_before = (rig.home / "file_snapshots" / "refs" / "threads" / f"{tid}.json").read_bytes()
    for bad in (0, 99, "0", "no-such-turn-id-0000", "01a22bb6-0000-7000-8000-000000000000"):
        for mode in ("both", "files", "conversation"):
            with pytest.raises(SessionError) as exc:
                s.rewind(tid, bad, mode=mode)
            msg = str(exc.value)
            assert msg and "\n" not in msg, msg
    with pytest.raises(SessionError):
        s.rewind(tid, 2, mode="sideways")
    assert rig.thread_ids() == threads and rig.tree() == files
    assert (rig.home / "file_snapshots" / "refs" / "threads" / f"{tid}.json").read_bytes() == side_before
    with pytest.raises(SessionError) as exc:
        s.redo(tid)
    assert "\n" not in str(exc.value)
    for unknown in ("01a22bb6-0000-7000-8000-000000000000", "not-a-thread"):
        with pytest.raises(SessionError) as exc:
            s.resume_thread(unknown)
        assert "\n" not in str(exc.value)
    assert rig.thread_ids() == threads and rig.tree() == files
    assert [p.text for p in s.prompts(tid)] == texts


def test_archived_thread_keeps_its_snapshots_and_comes_back(rigs: RigFactory) -> None:
    """Archiving is Codex's business (it moves the rollout); codexr's sidecar and snapshots stay,
    and once unarchived the thread can still be rewound with its files."""
    rig = rigs.make()
    s = rig.session
    tid, texts, trees, _ = _three_prompts(rig, "t9a")
    s.archive_thread(tid)
    assert tid not in {t.thread_id for t in s.threads()}
    assert s.sidecars.load(tid) is not None
    s.unarchive_thread(tid)
    assert [p.text for p in s.prompts(tid)] == texts
    s.rewind(tid, 2)
    _same_files(rig, trees[1], what="rewind after unarchive")


# ------------------------------------------------------------------------------------------ 10. another Codex build

#: Another Codex executable (e.g. the npm build's native binary) to run the core story against.
SECOND_CODEX_BIN = os.environ.get("CODEXR_TEST_SECOND_CODEX_BIN", "")


@pytest.mark.skipif(not SECOND_CODEX_BIN, reason="no second Codex binary: set CODEXR_TEST_SECOND_CODEX_BIN=/path/to/"
                    "codex to run the core rewind/redo story against another Codex build")
def test_core_rewind_redo_story_on_a_second_codex_binary(rigs: RigFactory) -> None:
    """Three prompts, a rewind to 2 with a turn on the fork, redo, a rewind to 1, redo: on the other build."""
    answer = subprocess.run([SECOND_CODEX_BIN, "--version"], capture_output=True, text=True, timeout=30)
    assert answer.returncode == 0, f"{SECOND_CODEX_BIN} --version failed: {answer.stderr}"
    rig = rigs.make(codex_bin=SECOND_CODEX_BIN)
    s = rig.session
    assert s.client._runtime_version == answer.stdout.split()[-1]  # really that build behind the session
    tid, texts, trees, _ = _three_prompts(rig, "t10")
    original = _ids(s.prompts(tid))
    hashes = rollout_hashes(rig.home)
    r = s.rewind(tid, 2)
    _same_files(rig, trees[1], what="rewind to prompt 2 on the second binary")
    assert [p.text for p in s.prompts(r.thread_id)] == texts[:1]
    assert rig.turn(r.thread_id, "t10-next on the fork").status == "completed"
    (req,) = _requests_for(rig.model, "t10-next on the fork")
    assert user_texts(req) == [texts[0], "t10-next on the fork"]
    red = s.redo(r.thread_id)
    assert red.thread_id == tid and red.turns_since_rewind == 1
    _same_tree(rig, trees[3], what="redo on the second binary")
    r1 = s.rewind(tid, 1)
    _same_files(rig, trees[0], what="rewind to prompt 1 on the second binary")
    assert s.prompts(r1.thread_id) == []
    assert s.redo(r1.thread_id).thread_id == tid
    _same_tree(rig, trees[3], what="second redo on the second binary")
    assert _ids(s.prompts(tid)) == original
    assert_rollouts_untouched(hashes, rollout_hashes(rig.home), "rewind/redo on the second binary")


def test_a_new_threads_first_pre_turn_capture_is_taken_while_codex_starts(model: ScriptedModel, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`codexr exec` on a new thread (Session's `ahead`): the pre-turn capture runs on its own thread while Codex
    starts, not after it, and it is the turn's pre snapshot: the files as they were, the turn's file only after."""
    began, overlapped, takers = threading.Event(), [], []
    real_init, real_begin = CodexConnection.__init__, Recorder.begin

    def init(self: CodexConnection, *a: Any, **k: Any) -> None:
        overlapped.append(began.wait(10))  # the capture began before Codex is started: they run side by side
        real_init(self, *a, **k)

    def begin(self: Recorder, side: Any, text: str) -> Any:
        takers.append(threading.current_thread().name)
        began.set()
        return real_begin(self, side, text)

    monkeypatch.setattr(CodexConnection, "__init__", init)
    monkeypatch.setattr(Recorder, "begin", begin)
    model.script("ahead-go", [add_file("made.txt", "made by the turn\n"), message("done")])
    opts = session_options(model, tmp_path, {"a.txt": "before\n"})
    with Session(opts, ahead="ahead-go") as session:
        thread = session.start_thread()
        out = session.run_turn(thread, "ahead-go")
        assert out.pre is not None and out.post is not None
        pre = dict(captured_items(session.store.files(out.pre)))
        post = dict(captured_items(session.store.files(out.post)))
    assert overlapped == [True] and takers == ["codexr-pre-turn"]
    assert set(pre) == {"a.txt"} and set(post) == {"a.txt", "made.txt"}


def test_a_rewind_reads_the_newest_snapshots_records_while_codex_starts(model: ScriptedModel, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`codexr rewind` and `redo` (Session's `read_ahead`): the records of the workspace's newest snapshot's chain,
    the one written whole among them, are read on their own thread while Codex starts, and the rewind's target is
    replayed from them: the rewind itself reads none of them again, and puts the files back as ever."""
    model.script("make-it", [add_file("made.txt", "made by the turn\n"), message("done")])
    opts = session_options(model, tmp_path, {"a.txt": "before\n", "sub/b.txt": "b\n"})
    with Session(opts) as session:
        thread = session.start_thread()
        out = session.run_turn(thread, "make-it")
        assert out.pre is not None and (opts.cwd / "made.txt").exists()
    reads: dict[str, list[str]] = {}
    began = threading.Event()
    overlapped: list[bool] = []
    real_init, real_read = CodexConnection.__init__, Repository._read_record

    def init(self: CodexConnection, *a: Any, **k: Any) -> None:
        overlapped.append(began.wait(10))  # the reads began before Codex is started: they run side by side
        real_init(self, *a, **k)

    def read(self: Repository, snap_id: str) -> Any:
        reads.setdefault(threading.current_thread().name, []).append(snap_id)
        began.set()
        return real_read(self, snap_id)

    monkeypatch.setattr(CodexConnection, "__init__", init)
    monkeypatch.setattr(Repository, "_read_record", read)
    with Session(opts, watch=False, read_ahead=True) as session:
        ahead = set(reads.pop("codexr-records-ahead", []))
        r = session.rewind(thread, 1, mode="files")
        assert r.restore is not None
    assert overlapped == [True]
    assert out.pre in ahead and session.store.head(out.pre).parent in ahead | {None}
    assert not ahead & {snap for names in reads.values() for snap in names}, reads  # none read twice
    assert not (opts.cwd / "made.txt").exists() and (opts.cwd / "a.txt").read_text() == "before\n"
