"""Package boundaries: `snapshot_store` is a standalone library; `config` never reaches into `app`."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
STORE_MODULES = ["snapshot_store", *(f"snapshot_store.{m}" for m in
                                     ("store", "restore", "maint.gc", "maint.verify", "scope", "capture",
                                      "repository.packs", "workspace"))]
FORBIDDEN = ["app", "textual", "prompt_toolkit", "openai_codex", "config"]


def loaded_after_import(modules: list[str]) -> set[str]:
    """Import `modules` in a fresh interpreter (repo root first on the path); return sys.modules' keys."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout))


def top_level(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def test_snapshot_store_imports_no_app_ui_sdk_or_config() -> None:
    loaded = loaded_after_import(STORE_MODULES)
    assert set(STORE_MODULES) <= loaded  # the imports really happened
    leaked = top_level(loaded) & set(FORBIDDEN)
    assert not leaked, f"importing snapshot_store pulled in {sorted(leaked)}"


def test_config_does_not_import_app() -> None:
    loaded = loaded_after_import(["config", "config.loader", "config.settings", "config.sizes"])
    assert "config" in loaded
    assert "app" not in top_level(loaded)


def imported_modules(path: Path) -> list[tuple[int, str, int]]:
    """(line, module, relative level) for every import statement in a source file."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    out: list[tuple[int, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module or "", node.level))
    return out


@pytest.mark.parametrize(("package", "banned"), [
    ("snapshot_store", {"app", "config", "textual", "prompt_toolkit", "openai_codex"}),
    ("config", {"app", "textual", "prompt_toolkit", "openai_codex"}),
])
def test_sources_contain_no_forbidden_import(package: str, banned: set[str]) -> None:
    files = sorted((REPO / package).rglob("*.py"))
    assert files
    bad = []
    for f in files:
        depth = len(f.relative_to(REPO / package).parts)  # 1 for a top-level module, 2 inside a subpackage
        for line, module, level in imported_modules(f):
            # A relative import climbing out of the package (from .. import app) counts as well.
            head = module.split(".")[0]
            if (level == 0 and head in banned) or (level > depth and (head in banned or not module)):
                bad.append(f"{f.relative_to(REPO)}:{line}: {'.' * level}{module}")
    assert not bad, "forbidden imports:\n" + "\n".join(bad)



def test_session_core_imports_no_ui() -> None:
    """The session core is shared by every front end, so it must not pull in a UI toolkit."""
    loaded = top_level(loaded_after_import(["app.session", "app.recording.sidecar", "app.recording.workspace_lock"]))
    assert not loaded & {"textual", "prompt_toolkit"}, loaded & {"textual", "prompt_toolkit"}


def test_store_commands_do_not_load_the_codex_sdk() -> None:
    """`codexr snapshots …` never starts Codex, so it must not pay the SDK's ~0.5 s import."""
    loaded = top_level(loaded_after_import(["app.cli", "app.cmds.snapshot_cmds", "app.cmds.agent_cmds",
                                            "app.cmds.demo"]))
    assert "openai_codex" not in loaded


def _runtime_imports(path: Path) -> set[str]:
    """Modules of the package a file imports at run time (imports under `if TYPE_CHECKING:` do not count), as
    paths below snapshot_store/ without `.py` ("restore/apply"), whatever the relative level."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING" for n in ast.walk(node)}
    here = path.parent.relative_to(REPO / "snapshot_store").parts
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and id(node) not in typing_only:
            base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
            out.add("/".join((*base, *(node.module or "").split("."))).strip("/"))
    return out


def _module_files(name: str) -> list[Path]:
    """The file of a module, or every file of a package."""
    pkg = REPO / "snapshot_store"
    return sorted((pkg / name).rglob("*.py")) if (pkg / name).is_dir() else [pkg / f"{name}.py"]


def test_the_store_and_what_it_builds_on_do_not_import_each_other() -> None:
    """`store` builds on restore, scope, packs...; none of them imports `store` back (no import cycle)."""
    pkg = REPO / "snapshot_store"
    below = {m for f in _module_files("store") + _module_files("workspace") for m in _runtime_imports(f)} - {""}
    assert any(m.startswith("restore") for m in below)
    cycles = sorted(m for m in below if m not in ("store", "workspace") for f in _module_files(m)
                    if {"store", "workspace"} & _runtime_imports(f))
    assert not cycles, cycles
    assert pkg.is_dir()


def test_no_module_reaches_into_private_store_members() -> None:
    """restore and gc use Store's public interface, so its internals can change without breaking them."""
    bad = []
    for path in sorted((REPO / "snapshot_store").glob("*.py")):
        if path.name == "store.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "store"
                    and node.attr.startswith("_")):
                bad.append(f"{path.name}:{node.lineno} store.{node.attr}")
    assert not bad, bad


def test_store_restates_no_operation_of_the_workspace_or_the_capturer() -> None:
    """Store.restore restated Workspace.restore's options, and Store.capture the Capturer's with caller-dependent
    flags; the front door is `store.at(root)` (or `store.origin(snapshot)`) now, and Store repeats none of it (its
    `diff` compares two snapshots, its `close` closes the capturer too). No **kwargs a type checker cannot see."""
    import inspect

    from snapshot_store import Store
    from snapshot_store.capture import Capturer
    from snapshot_store.workspace import Workspace

    own = {n for n in vars(Store) if not n.startswith("_")}
    door = {n for cls in (Workspace, Capturer) for n in vars(cls) if not n.startswith("_")}
    assert own & door == {"close", "diff"}, own & door
    assert list(inspect.signature(Store.diff).parameters) == ["self", "a", "b"]
    for name in own:
        params = inspect.signature(getattr(Store, name)).parameters.values()
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params), name


def test_a_command_starts_with_its_own_code_only(tmp_path: Path) -> None:
    """`codexr history list` loads neither the other commands nor pydantic, the SDK or Textual, nor dataclasses:
    every codexr process pays for what it imports (start-up is most of a `history` command, bench/bench_history.py)."""
    code = ("import json, sys\n"
            "import app.cli\n"
            "bare = sorted(sys.modules)\n"
            "rc = app.cli.main(['history', 'list', '--all', '--json'])\n"
            "print(json.dumps([rc, bare, sorted(sys.modules)]), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    rc, bare, loaded = json.loads(out.stderr.splitlines()[-1])
    assert rc == 0 and json.loads(out.stdout)["total"] == 0, out.stderr
    other_commands = {f"app.cmds.{m}" for m in ("agent_cmds", "snapshot_cmds", "demo", "doctor", "tui_cmds",
                                                 "config_cmds")}
    early = set(bare) & (other_commands | {"app.cmds.history_cmds", "config", "snapshot_store"})
    assert not early, f"`import app.cli` loads {sorted(early)}"
    assert not set(loaded) & other_commands, sorted(set(loaded) & other_commands)
    assert not top_level(set(loaded)) & {"pydantic", "openai_codex", "textual", "prompt_toolkit"}
    assert not set(loaded) & {"dataclasses", "inspect", "shutil"}  # ~6 ms of 40 (snapshot_store/records.py)


def test_a_one_shot_capture_loads_no_restore_journal_or_process_machinery(tmp_path: Path) -> None:
    """An unchanged `codexr snapshots capture` without a server (every command on a Mac) imports what it uses: not
    restore's modules, the inotify journal, the resident server's or the held rewind's process handling
    (`subprocess`, `socket`, `secrets`), nor the permission presets, nor dataclasses and the inspect it loads (~14 ms
    with the classes made: snapshot_store/records.py), nor shutil for argparse's width (~1.7 ms), nor the fast path
    that re-reads changed files (~1 ms): issue 35's one-shot row is Python's start and these imports.
    (The first capture of a workspace reads Git's index through pygit2, which loads ssl and socket.)"""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("notes\n")
    code = ("import json, sys\n"
            "import app.cli\n"
            "rc = app.cli.main(['snapshots', 'capture'])\n"
            "print(json.dumps([rc, sorted(sys.modules)]), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "home"), "CODEXR_MONITOR": "0",
           "CODEXR_SERVER": "0"}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], cwd=ws, env=env, capture_output=True, text=True,
                             timeout=60)
    rc, loaded = json.loads(out.stderr.splitlines()[-1])
    assert rc == 0 and "no changes since the last snapshot" in out.stderr, out.stderr
    unwanted = {"subprocess", "socket", "secrets", "inotify_simple", "snapshot_store.detect.inotify",
                "app.rewind.held", "app.recording.sidecar", "app.recording.workspace_lock", "app.codex.permissions",
                "dataclasses", "inspect", "shutil", "snapshot_store.detect.fastpath", "snapshot_store.detect.mapfacts"}
    assert not set(loaded) & unwanted, sorted(set(loaded) & unwanted)
    assert not [m for m in loaded if m.startswith("snapshot_store.restore")], loaded


def test_a_one_shot_command_does_not_parse_an_unchanged_config_toml(tmp_path: Path) -> None:
    """Every Codex user has a config.toml: parsing it (tomllib's import and the parse) was ~4-6 ms of each one-shot
    command. Once parsed where the store exists, its answer is kept until the file changes (config/verdict.py)."""
    import time

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "notes.txt").write_text("notes\n")
    (home / "config.toml").write_text('model = "o3"\n[features]\nweb_search_request = true\n')
    code = ("import json, sys\n"
            "import app.cli\n"
            "rc = app.cli.main(['snapshots', 'capture'])\n"
            "print(json.dumps([rc, 'tomllib' in sys.modules]), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_MONITOR": "0",
           "CODEXR_SERVER": "0"}
    time.sleep(max(0.0, os.stat(home / "config.toml").st_ctime + 2.1 - time.time()))  # older than config/verdict.py's
    parsed = []
    for _ in range(4):
        out = subprocess.run([sys.executable, "-c", code], cwd=ws, env=env, capture_output=True, text=True, timeout=60)
        rc, loaded = json.loads(out.stderr.splitlines()[-1])
        assert rc == 0, out.stderr
        parsed.append(loaded)
    assert parsed == [True, True, False, False]  # the first makes the store, where the second keeps the answer
    assert (home / "file_snapshots" / "cache" / "config.verdict").is_file()
    (home / "config.toml").write_text('model = "o3"\n[file_snapshots]\nresidue_max_files = "x"\n')
    out = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env,
                         capture_output=True, text=True, timeout=60)  # the edit is seen at once
    assert out.returncode == 2 and "residue_max_files" in out.stderr, out.stderr


@pytest.mark.parametrize("argv", [
    ["snapshots", "capture", "--label", "x"], ["snapshots", "restore", "ab12", "--dry-run", "--only", "a", "b"],
    ["-c", "k=v", "snapshots", "list", "--all", "-C", "/w"], ["history", "search", "needle", "-n", "3"],
    ["history", "export", "ab12", "-o", "out.md"],
])
def test_a_group_command_builds_only_its_subcommand_and_parses_as_its_whole_group(
        argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot `codexr snapshots capture` builds `capture`'s parser, not its group's eight others (~2 ms of
    argparse each time it runs), and reads the command line exactly as its whole group does."""
    from app import cli

    monkeypatch.setattr(cli, "_NARROW_PARSERS", {})
    args = cli.parse(argv)
    whole_group = cli.build_parser([cli.COMMANDS[args.command]], app_flags=False)  # what the narrowing was before
    assert vars(args) == vars(cli._settings_merged(whole_group.parse_args(argv)))
    (parser,) = cli._NARROW_PARSERS.values()
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (command,) = groups[0].choices.values()
    (group,) = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(group.choices) == [argv[argv.index(args.command) + 1]]


def test_a_group_command_the_narrowed_tree_cannot_settle_is_the_whole_trees(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt subcommand, or none, is worded by the whole tree: its error and help list every subcommand."""
    from app import cli

    monkeypatch.setattr(cli, "_NARROW_PARSERS", {})
    with pytest.raises(SystemExit) as exc:
        cli.parse(["snapshots", "captur"])
    assert exc.value.code == 2
    assert "invalid choice: 'captur' (choose from 'capture', 'list', 'show', 'diff', 'restore', 'verify', 'gc')" in (
        capsys.readouterr().err)
    args = cli.parse(["snapshots"])
    args.handler(None, args)
    assert "{capture,list,show,diff,restore,verify,gc}" in capsys.readouterr().out


@pytest.mark.parametrize("columns", ["44", "132", None, "junk"])
def test_help_is_laid_out_as_argparse_lays_it_out(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """codexr's help formatter finds the width without shutil (a one-shot command no longer loads it for that) and
    lays help out exactly as argparse's own: as wide as $COLUMNS, else the terminal, else 80 columns."""
    from app import cli

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    tree = cli.build_parser()
    (commands,) = [a for a in tree._actions if isinstance(a, argparse._SubParsersAction)]
    (group,) = [a for a in commands.choices["snapshots"]._actions if isinstance(a, argparse._SubParsersAction)]
    for parser in (tree, commands.choices["exec"], group.choices["restore"]):
        ours = parser.format_help()
        parser.formatter_class = argparse.HelpFormatter
        assert ours == parser.format_help()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=130)
    wide = parser.format_help()
    assert (len(ours.splitlines()) > len(wide.splitlines())) == (columns != "132")  # the width was taken
