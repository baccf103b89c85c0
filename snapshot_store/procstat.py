"""A process's fields from Linux's /proc/PID/stat, read one way for every caller: after the last ")", since the
command name before it may hold spaces and parentheses of its own."""

from __future__ import annotations


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields after the command name (0: the state, 1: the parent's pid, 19: the start time in clock ticks);
    None where /proc does not answer (no such process, or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.rpartition(b")")[2].split()


def start_time(pid: int) -> str | None:
    """When the process started, in the kernel's clock ticks since boot (kept across exec): with its pid, which
    process it is, whatever reused the pid since."""
    fields = stat_fields(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def parent_pid(pid: int) -> int | None:
    """The pid of the process's parent (None where /proc does not answer)."""
    fields = stat_fields(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 else None


def ancestors(pid: int, limit: int = 64) -> list[int]:
    """`pid`'s parent, its parent's parent, ... nearest first, up to init (pid 1) or `limit` steps (as far as /proc
    answers: [] where it does not)."""
    out: list[int] = []
    current = parent_pid(pid)
    while current is not None and current > 0 and len(out) < limit and current not in out:
        out.append(current)
        if current == 1:
            break
        current = parent_pid(current)
    return out
