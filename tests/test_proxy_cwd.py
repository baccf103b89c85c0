"""A client of the proxy cannot make a thread work where codexr does not record (issue 30 §2): a `cwd` outside the
workspace, or in Codex's home or the snapshot store, is refused with a JSON-RPC error before Codex sees it, so a
revert never says "0 written, 0 deleted" about a thread whose files changed elsewhere. The workspace and its
subdirectories work as before. A real `codexr app-server` behind the `codexr-codex` shim, the real Codex behind it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_proxy import proxy_env, run_turn

from app.codex.codex_sdk import CodexClient, CodexConfig, JsonRpcError
from app.codex.scripted_model import ScriptedModel, add_file, message

SHIM = Path(sys.executable).parent / "codexr-codex"


@pytest.fixture
def client(model: ScriptedModel, tmp_path: Path) -> Iterator[CodexClient]:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    # Through the shim, so through `codexr app-server`.
    c = CodexClient(CodexConfig(codex_bin=str(SHIM), cwd=str(ws), env=proxy_env(model, tmp_path / "home")))
    c.start()
    c.initialize()
    yield c
    c.close()


def refused(fn: Callable[[], object]) -> str:
    """The message of the JSON-RPC error `fn`'s request got."""
    try:
        fn()
    except JsonRpcError as exc:
        return str(exc.message)
    raise AssertionError("not refused")


def test_a_thread_outside_the_workspace_is_refused_and_nothing_is_written_there(model: ScriptedModel,
                                                                                client: CodexClient,
                                                                                tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (str(elsewhere), "/", "..", str(tmp_path / "ws" / "sub" / ".." / "..")):
        why = refused(lambda cwd=cwd: client.thread_start({"cwd": cwd, "approvalPolicy": "never",
                                                            "sandbox": "danger-full-access"}))
        assert "outside the workspace" in why and "codexr -C" in why, why
    link = tmp_path / "ws" / "out"
    link.symlink_to(elsewhere)  # a link inside the workspace to a directory outside it is outside
    assert "outside the workspace" in refused(lambda: client.thread_start({"cwd": str(link)}))
    assert list(elsewhere.iterdir()) == []


def test_codex_home_and_the_store_are_never_a_threads_cwd(client: CodexClient, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for cwd in (home, home / "file_snapshots"):
        assert "outside the workspace" in refused(lambda cwd=cwd: client.thread_start({"cwd": str(cwd)}))


def test_a_turn_cannot_move_a_thread_out_of_the_workspace(model: ScriptedModel, client: CodexClient,
                                                         tmp_path: Path) -> None:
    """`turn/start` carries a `cwd` override too (it persists for later turns): refused the same way, while a
    thread in a subdirectory of the workspace works and is recorded."""
    ws = tmp_path / "ws"
    model.script("cwd sub one", [add_file("made.txt", "in sub\n"), message("made it")])
    thread = client.thread_start({"cwd": str(ws / "sub"), "approvalPolicy": "never",
                                  "sandbox": "danger-full-access"}).thread.id
    why = refused(lambda: client.turn_start(thread, [{"type": "text", "text": "cwd sub one"}],
                                            params={"cwd": str(tmp_path)}))
    assert "outside the workspace" in why, why
    assert run_turn(client, thread, "cwd sub one")["status"] == "completed"
    assert (ws / "sub" / "made.txt").read_text() == "in sub\n"
