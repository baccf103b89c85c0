"""`codexr --version` and `codexr doctor`: which codexr, SDK and Codex run, and whether they can work together."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from snapshot_store import StoreError

from ..codex.codex_bin import CodexBinary, binary_version, choose, pinned_path
from ..shared.lines import human_bytes, plural
from .context import Context, UsageError

SDK_DIST = "openai-codex"
PINNED_DIST = "openai-codex-cli-bin"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `doctor`."""
    p = sub.add_parser("doctor", help="check the SDK, the Codex binaries, CODEX_HOME, login and the store")
    p.add_argument("--codex-bin", default=argparse.SUPPRESS, metavar="PATH", help="the Codex executable to check")
    p.add_argument("--json", action="store_true", help="print JSON")
    # the default is app/codex/provider.py's PROBE_TIMEOUT_S, not imported here: every command builds this parser
    p.add_argument("--probe-timeout", type=_probe_seconds, default=None, metavar="SECONDS",
                   help="how long the model provider check waits for an answer (default 5)")
    p.set_defaults(handler=doctor)


def _probe_seconds(text: str) -> float:
    """`--probe-timeout`'s value: more than 0 seconds (argparse words a mistake as one line, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give more than 0 seconds")
    return value


def _dist_version(name: str) -> str:
    import importlib.metadata  # ~20 ms: only --version and doctor read package metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def codexr_version() -> str:
    """codexr's own version, as installed (or as the clone's metadata says)."""
    return _dist_version("codex-rewind")


def sdk_protocol_version() -> str:
    """The Codex version whose app-server protocol the SDK was generated from: the runtime it pins."""
    import importlib.metadata

    for req in importlib.metadata.requires(SDK_DIST) or []:
        match = re.fullmatch(rf"{PINNED_DIST}\s*==\s*([\w.+-]+)", req.split(";")[0].strip())
        if match:
            return match.group(1)
    return _dist_version(SDK_DIST)


def _env(ctx: Context) -> dict[str, str]:
    """The environment Codex runs in: ours, with the CODEX_HOME codexr resolved."""
    return {**os.environ, "CODEX_HOME": str(ctx.home)}


def version(ctx: Context, args: argparse.Namespace) -> int:
    """`codexr --version`: codexr's, the SDK's and the chosen Codex binary's versions, one per line."""
    chosen = choose(getattr(args, "codex_bin", None), ctx.settings)
    try:
        codex, error = binary_version(chosen.path, _env(ctx)), ""
    except OSError as exc:
        codex, error = "unknown", str(exc)
    if ctx.json:
        ctx.emit({"codexr": codexr_version(), "sdk": _dist_version(SDK_DIST),
                  "codex": {"version": codex, "path": str(chosen.path), "source": chosen.source}})
    else:
        print(f"codexr {codexr_version()}")
        print(f"{SDK_DIST} {_dist_version(SDK_DIST)}")
        print(f"codex {codex}  {chosen.describe()}")
    if error:
        print(f"codexr: error: {error}", file=sys.stderr)
        return 1
    return 0


@dataclass
class Check:
    """One line of the doctor's report: `fix` says what to do when the status is not ok."""

    name: str
    status: str  # "ok" | "warn" | "fail" | "skip" (not checked: what it needs is missing, the line says what)
    message: str
    fix: str = ""

    def line(self) -> str:
        """How the check prints."""
        tag = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}[self.status]
        return f"{tag}  {self.message}" + (f"; fix: {self.fix}" if self.fix else "")


def _version_key(text: str) -> tuple[int, ...] | None:
    """0.163.0 -> (0, 163, 0); None for what is not a plain release version (alpha builds, garbage)."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in match.groups()) if match else None


def protocol_check(version_text: str, sdk_protocol: str, minimum: str) -> Check:
    """Compare the chosen Codex's version with the SDK's protocol: older is a warning, below the minimum fails."""
    have, want, floor = _version_key(version_text), _version_key(sdk_protocol), _version_key(minimum)
    name = "protocol"
    if have is None or want is None or floor is None or have == (0, 0, 0):
        return Check(name, "warn", f"Codex {version_text} cannot be compared with the SDK's protocol "
                     f"(Codex {sdk_protocol})", f"prefer a released Codex >= {sdk_protocol}")
    if have < floor:
        return Check(name, "fail", f"Codex {version_text} is older than the oldest the SDK accepts ({minimum})",
                     f"use Codex >= {sdk_protocol} (--codex-bin) or drop the choice to use the pinned one")
    if have < want:
        return Check(name, "warn", f"Codex {version_text} speaks an older app-server protocol than the SDK's "
                     f"(Codex {sdk_protocol}): newer requests may be refused",
                     f"use Codex >= {sdk_protocol} (--codex-bin) or drop the choice to use the pinned one")
    return Check(name, "ok", f"app-server protocol: Codex {version_text} >= the SDK's (Codex {sdk_protocol})")


def _binary_check(name: str, label: str, binary: CodexBinary, env: dict[str, str]) -> tuple[Check, str | None]:
    try:
        ver = binary_version(binary.path, env)
    except OSError as exc:
        fix = ("reinstall codexr (the openai-codex-cli-bin package)" if binary.pinned
               else f"give a working Codex binary ({binary.source})")
        return Check(name, "fail", f"{label}: {exc}", fix), None
    where = f"{binary.path}" + ("" if binary.pinned else f" (from {binary.source})")
    return Check(name, "ok", f"{label} {ver}: {where}"), ver


def _app_server_checks(ctx: Context, args: argparse.Namespace, binary: CodexBinary) -> tuple[list[Check], str]:
    """Start the chosen Codex's app-server once: does it answer `initialize`, and is Codex logged in (and how:
    the kind of account, "" for none)?"""
    from openai_codex.client import CodexClient, CodexConfig
    from openai_codex.errors import CodexError

    from snapshot_store.errors import WorkspaceError

    from .agent_cmds import codex_overrides

    checks: list[Check] = []
    cwd = Path(args.cd)
    try:
        ctx.workspace(args.cd)
    except WorkspaceError as exc:  # doctor still checks everything else, from CODEX_HOME's parent
        checks.append(Check("workspace", "warn", f"this directory is no workspace for codexr: {exc}",
                            "run codexr in a project directory"))
        cwd = ctx.home.parent
    cfg = CodexConfig(codex_bin=binary.sdk_value(), cwd=str(cwd if cwd.is_dir() else ctx.home.parent),
                      env={"CODEX_HOME": str(ctx.home)}, config_overrides=codex_overrides(args),
                      client_name="codexr", client_title="codex-rewind")
    client = CodexClient(cfg)
    try:
        client.start()
        init = client.initialize()
        account = client.account_read()
    except (OSError, CodexError) as exc:
        tail = [ln.strip() for ln in client._stderr_tail(60).splitlines() if ln.strip().startswith("Error:")]
        why = tail[-1] if tail else (str(exc).splitlines() or ["no answer"])[0][:200]
        return [*checks, Check("app_server", "fail", f"Codex app-server did not start: {why}",
                               "run `codexr exec hello` for Codex's full message; check config.toml and the binary")
                ], ""
    finally:
        with contextlib.suppress(Exception):
            client.close()
    checks.append(Check("app_server", "ok", f"Codex app-server answers initialize ({init.userAgent})"))
    kind = ""
    if account.account is not None:
        kind = str(account.account.root.type)
        who = getattr(account.account.root, "email", None)
        checks.append(Check("login", "ok", f"login: logged in ({kind}{', ' + who if who else ''})"))
    elif not account.requires_openai_auth:
        checks.append(Check("login", "ok", "login: not needed (the configured model provider needs no OpenAI login)"))
    else:
        checks.append(Check("login", "fail", "login: not logged in, and the model provider needs it",
                            "run `codexr login` (or `codexr login --with-api-key`)"))
    return checks, kind


def _codex_config_broken(ctx: Context) -> bool:
    """Whether the settings error is in config.toml, which Codex reads too (codexr.toml is codexr's alone)."""
    from config.files import CONFIG_FILE_NAME, ConfigError, read_toml

    if ctx.config_error is None:
        return False
    try:
        read_toml(ctx.home / CONFIG_FILE_NAME, CONFIG_FILE_NAME)
    except ConfigError:
        return True
    return False


def _provider_check(ctx: Context, args: argparse.Namespace, account_kind: str) -> Check:
    """Whether anything answers at the model provider's address: Codex's app-server starts without asking it, and a
    turn then waits for it without a limit (app/codex/provider.py). It waits `--probe-timeout` seconds for an
    answer, PROBE_TIMEOUT_S unless given."""
    from ..codex.provider import DEFAULT_PROVIDER, PROBE_TIMEOUT_S, configured_provider, probe
    from .agent_cmds import codex_overrides

    provider = configured_provider(ctx.home, codex_overrides(args), chatgpt_login=account_kind == "chatgpt")
    if provider is None:
        return Check("provider", "skip", "model provider: not checked (config.toml cannot be read)")
    if provider.base_url is None:
        return Check("provider", "skip", f"model provider {provider.name}: built into Codex at an address codexr "
                     "does not know; not checked")
    timeout: float | None = getattr(args, "probe_timeout", None)
    found = probe(provider, PROBE_TIMEOUT_S if timeout is None else timeout)
    if found.answered:
        return Check("provider", "ok", f"model provider {provider.name}: {provider.base_url} answers "
                     f"({found.detail} to GET /models)")
    where = ("OPENAI_BASE_URL" if provider.name == DEFAULT_PROVIDER and not provider.from_table
             else f"base_url of [model_providers.{provider.name}] in config.toml")
    return Check("provider", "fail", f"model provider {provider.name}: nothing answers at {provider.base_url} "
                 f"({found.detail}); Codex's turns would wait for it",
                 f"check {where}, the network and any proxy")


def _store_check(ctx: Context) -> Check:
    """A quick (not --full) verify of the snapshot store, and its size on disk."""
    from snapshot_store import Store
    from snapshot_store.maint.verify import verify

    path = ctx.store_dir
    if not (path / "format").exists():
        return Check("store", "ok", f"snapshot store {path}: none yet (created by the first snapshot)")
    try:
        store = Store.open(path, create=False, protected=[ctx.home])
    except (StoreError, OSError) as exc:
        return Check("store", "fail", f"snapshot store {path}: {exc}", "see `codexr snapshots verify`")
    try:
        report = verify(store, retention=None if ctx.config_error else ctx.settings.retention())
    except (StoreError, OSError) as exc:
        return Check("store", "fail", f"snapshot store {path}: {exc}", "see `codexr snapshots verify`")
    finally:
        store.close()
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    what = f"snapshot store {path}: {plural(report.snapshots, 'snapshot')}, {human_bytes(size)}"
    if not report.ok:
        return Check("store", "fail", f"{what}, damaged: {report.problems[0]}"
                     + (f" (+{len(report.problems) - 1} more)" if len(report.problems) > 1 else ""),
                     "`codexr snapshots verify --repair`, then `codexr snapshots verify --full`")
    return Check("store", "ok", f"{what}, healthy")


def _server_check() -> Check:
    """Whether one-shot commands run in the resident server (app/launch.py); never a failure."""
    from ..server.oneshot import server_wanted
    from ..server.runtime import RUNTIME_HOW, platform_problem, server_unavailable, socket_path
    from .server_cmds import servers

    if not server_wanted(["doctor"]):
        return Check("server", "ok", "resident server: off (CODEXR_SERVER=0 or interpreter options): every "
                     "command imports everything itself")
    platform = platform_problem()
    if platform is not None:  # nothing to fix: this system runs every command by itself
        return Check("server", "ok", f"resident server: off here ({platform}): every command runs by itself")
    why = server_unavailable()
    if why is not None:
        runtime = why.startswith("no runtime directory")
        return Check("server", "warn", f"resident server: unavailable ({why.split('; ')[0]})",
                     RUNTIME_HOW if runtime else "")
    path = socket_path(create=False)
    mine = [s for s in servers() if s["current"] and s["alive"]]
    if not mine:
        return Check("server", "ok", "resident server: not running (the next one-shot command starts it)")
    rss = f", {mine[0]['rss_bytes'] / 2**20:.0f} MiB" if mine[0]["rss_bytes"] else ""
    return Check("server", "ok", f"resident server: running, pid {mine[0]['pid']}{rss} ({path})")


def _path_check() -> Check:
    """Which `codexr` a shell runs: this one, or another first on PATH (the Rust fork's npm package `codex-rewind`
    installs a `codexr` too, with its own store beside this one's in CODEX_HOME/file_snapshots)."""
    import shutil

    found = shutil.which("codexr")
    if found is None:
        return Check("path", "ok", "codexr is not on PATH (run it as python3 bootstrap.py codexr, or from .venv/bin)")
    try:
        with open(found, "rb") as f:
            head = f.read(4096)
    except OSError:
        head = b""
    if b"app.launch" in head or b"app.cli" in head:
        return Check("path", "ok", f"codexr on PATH: {found}")
    real = os.path.realpath(found)
    other = " (the npm package codex-rewind, a Rust fork with its own store)" if "codex-rewind" in real else ""
    return Check("path", "warn", f"the codexr first on PATH is another program: {real}{other}",
                 f"run this one as {sys.executable} -m app, or put its directory first on PATH")


def _platform_checks() -> list[Check]:
    """What this system gives codexr, one line each (never a failure): how the workspace's volume compares names,
    and whether changes are journaled."""
    from snapshot_store.detect import watched
    from snapshot_store.detect.inotify import ChangeJournal
    from snapshot_store.names import probe

    folding = probe(Path.cwd(), may_write=False)  # doctor writes nothing into the directory it is run in
    if folding is None:
        names = Check("names", "ok", "names: not known here (no name in this directory to look up in another case)")
    elif folding.any:
        folds = " and ".join(w for w, on in (("letter case", folding.case), ("Unicode form", folding.unicode)) if on)
        names = Check("names", "ok", f"names: this volume takes names that differ only in {folds} for one file; "
                      "captures and restores treat them as one")
    else:
        names = Check("names", "ok", "names: this volume tells every spelling of a name apart")
    if sys.platform.startswith("linux") and ChangeJournal.available():
        journal = Check("journal", "ok", "change journal: inotify (a session's captures look only at what changed)")
    elif not sys.platform.startswith("linux") and watched.available():
        journal = Check("journal", "ok", "change journal: watchdog's observer (FSEvents on macOS; a session's "
                        "captures look only at what changed)")
    else:
        journal = Check("journal", "ok", f"change journal: none on {sys.platform} (every capture checks the stat "
                        "of every tracked file)")
    return [names, journal]


def _codex_tui_check(ctx: Context, binary: CodexBinary) -> Check:
    """What `codexr codex` needs of the chosen Codex beyond stdio: its app-server listening on loopback with a token
    (app/proxy/endpoints.py) and answering `initialize` there; a launcher script (npm's) is said, since its child,
    not the process codexr starts, is the TUI that connects (admitted as a descendant)."""
    import asyncio
    import json
    import secrets

    from ..proxy.endpoints import ListeningAppServer

    token = secrets.token_urlsafe(32)
    env = {**os.environ, "CODEX_HOME": str(ctx.home)}
    hello = {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "codexr", "version": "doctor"},
                                                          "capabilities": {"experimentalApi": True}}}

    async def attempt() -> str:
        with open(os.devnull, "wb") as log:
            server = await ListeningAppServer.start([str(binary.path), "app-server"], token,
                                                    cwd=ctx.home.parent, env=env, log=log)
            try:
                await server.send(json.dumps(hello))
                while True:
                    reply = await asyncio.wait_for(server.receive(), 30)
                    if reply is None or json.loads(reply).get("id") == 1:
                        return str(reply)
            finally:
                await server.close()

    try:
        reply = asyncio.run(attempt())
    except (ConnectionError, OSError, TimeoutError, ValueError) as exc:
        return Check("codex_tui", "fail", f"codexr codex: the chosen Codex does not serve the TUI's way ({exc})",
                     "run `codexr codex` for Codex's own message, or choose another Codex binary")
    if '"result"' not in reply:
        return Check("codex_tui", "fail", "codexr codex: the chosen Codex's listening app-server refused initialize",
                     "choose another Codex binary")
    try:
        with open(binary.path, "rb") as f:
            launcher = f.read(2) == b"#!"
    except OSError:
        launcher = False
    return Check("codex_tui", "ok", "codexr codex: the app-server listens with a token and answers"
                 + (" (a launcher script: the TUI it starts connects as its child)" if launcher else ""))


def doctor(ctx: Context, args: argparse.Namespace) -> int:
    """`codexr doctor`: one line per check; exit 1 when any check failed (warnings alone exit 0)."""
    from openai_codex._runtime_requirements import MINIMUM_RUNTIME_VERSION

    env = _env(ctx)
    sdk_protocol = sdk_protocol_version()
    checks = [] if ctx.config_error is None else [
        Check("config", "fail", ctx.config_error, "correct that line: until then every other command refuses to run, "
              "and doctor skips what needs the settings")]
    checks += [
        Check("codexr", "ok", f"codexr {codexr_version()}"),
        Check("sdk", "ok", f"SDK {SDK_DIST} {_dist_version(SDK_DIST)} (app-server protocol of Codex "
              f"{sdk_protocol}; accepts Codex >= {MINIMUM_RUNTIME_VERSION})"),
    ]
    pinned_version = None
    try:
        check, pinned_version = _binary_check("pinned", "pinned Codex", CodexBinary(pinned_path(), "pinned"), env)
        checks.append(check)
    except UsageError as exc:
        checks.append(Check("pinned", "fail", str(exc), "reinstall codexr"))
    chosen: CodexBinary | None = None
    try:
        chosen = choose(getattr(args, "codex_bin", None), None if ctx.config_error else ctx.settings)
    except UsageError as exc:
        checks.append(Check("chosen", "fail", f"chosen Codex: {exc}",
                            "give a Codex binary that exists and is executable, or drop the setting"))
    chosen_version = None
    if chosen is not None and not chosen.pinned:
        check, chosen_version = _binary_check("chosen", "chosen Codex", chosen, env)
        checks.append(check)
    elif chosen is not None:
        checks.append(Check("chosen", "ok", "chosen Codex: the pinned one (no --codex-bin, $CODEXR_CODEX_BIN"
                            + ("; file_snapshots.codex_bin not read: the settings cannot be read)" if ctx.config_error
                               else " or file_snapshots.codex_bin)")))
        chosen_version = pinned_version
    if chosen_version is not None:
        checks.append(protocol_check(chosen_version, sdk_protocol, MINIMUM_RUNTIME_VERSION))
    home_ok = ctx.home.is_dir() or not ctx.home.exists()
    checks.append(Check("codex_home", "ok", f"CODEX_HOME {ctx.home}" + ("" if ctx.home.exists() else
                                                                         " (created by Codex on first use)"))
                  if home_ok else Check("codex_home", "fail", f"CODEX_HOME {ctx.home} is not a directory",
                                        "point CODEX_HOME at a directory"))
    account_kind = ""
    if chosen is not None and home_ok and _codex_config_broken(ctx):
        checks.append(Check("app_server", "skip", "Codex app-server: not started (Codex cannot read config.toml "
                            "either)"))
    elif chosen is not None and home_ok:
        server_checks, account_kind = _app_server_checks(ctx, args, chosen)
        checks += server_checks
        if all(c.status == "ok" for c in checks if c.name == "app_server"):
            checks.append(_codex_tui_check(ctx, chosen))
    if home_ok:
        checks.append(_provider_check(ctx, args, account_kind))
    if home_ok:
        checks.append(_store_check(ctx))
    checks.append(_server_check())
    checks += [_path_check(), *_platform_checks()]
    ok = all(c.status != "fail" for c in checks)
    if ctx.json:
        ctx.emit({"ok": ok, "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            print(c.line())
    return 0 if ok else 1
