"""Who writes the pipe on stdin: a command of the same pipeline (`make 2>&1 | codexr exec "why"`), whose output is
worth waiting for however slow, or a process that started codexr (a harness, an ssh session) and may hold it open
without ever writing or closing it.

Why: `codexr exec PROMPT` gives a silent pipe a grace (agent_cmds.STDIN_GRACE_S) and then goes on without it, so an
open stdin never hangs it; a build or test run that took longer than that to print its first line was dropped from
the prompt. Linux's /proc tells the two writers apart; where it does not answer (another system, another user's
process, a hidden /proc) nothing is found and the grace stands.
"""

from __future__ import annotations

import os
import stat

from snapshot_store.procstat import ancestors

O_ACCMODE = 0o3
#: The process this one runs a command for, when that is another (the resident server's worker: its client, as the
#: kernel named it on connecting): that process's ancestors, not the server's, are the ones that started the command.
caller: int | None = None


def pipe_inode(fd: int) -> int | None:
    """The inode of the pipe `fd` reads (None: not a pipe)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_ino if stat.S_ISFIFO(st.st_mode) else None


def writers(inode: int, proc: str = "/proc") -> list[int]:
    """The processes holding the pipe `inode` open for writing, as far as /proc shows them (this user's)."""
    link = f"pipe:[{inode}]"
    found: list[int] = []
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") != link:
                    continue
                with open(f"{proc}/{pid}/fdinfo/{fd}", "rb") as f:
                    flags = next((int(line.split()[1], 8) for line in f if line.startswith(b"flags:")), 0)
            except (OSError, ValueError, IndexError):
                continue
            if flags & O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
                found.append(pid)
                break
    return found


def producers(fd: int) -> list[int]:
    """The commands of this process's pipeline writing the pipe `fd` reads: its writers when none of them started
    this process ([]: not a pipe, no writer found, or one is an ancestor, which may hold it open forever)."""
    inode = pipe_inode(fd)
    if inode is None:
        return []
    me = caller if caller is not None else os.getpid()
    found = [pid for pid in writers(inode) if pid not in (me, os.getpid())]
    if not found or set(ancestors(me)).intersection(found):
        return []
    return found


def command_name(pid: int) -> str:
    """A process's command name (/proc/PID/comm), or its pid."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or str(pid)
    except OSError:
        return str(pid)
