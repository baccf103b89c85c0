"""A synthetic but realistic replay log for the TUI benchmark: N turns, M MB of command output in all."""

from __future__ import annotations

import random
from typing import Any

from app.codex.events import (
    AgentMessage,
    CommandFinished,
    CommandStarted,
    FileChanges,
    FileDiff,
    FileStat,
    Reasoning,
    ThreadLoaded,
    TokenUsage,
    TurnFinished,
    TurnStarted,
    UserPrompt,
)

WORDS = ("pool", "connection", "retry", "timeout", "handler", "cache", "index", "parser", "token", "config",
         "session", "buffer", "schema", "worker", "queue", "socket", "client", "server", "module", "test")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _markdown(rng: random.Random, turn: int) -> str:
    items = "\n".join(f"- `{rng.choice(WORDS)}.py`: {_sentence(rng, 8)}" for _ in range(4))
    code = "\n".join(f"    {rng.choice(WORDS)} = {rng.randint(0, 999)}" for _ in range(6))
    return (f"## Turn {turn}\n\n{_sentence(rng, 20)} {_sentence(rng, 15)}\n\n{items}\n\n"
            f"```python\ndef f_{turn}():\n{code}\n```\n\n{_sentence(rng, 12)}")


def _output(rng: random.Random, size: int) -> str:
    lines = []
    total = 0
    n = 0
    while total < size:
        line = f"tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)}_{n} PASSED [{n % 100:3d}%]"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)


def _diff(rng: random.Random, path: str) -> str:
    body = "\n".join(f" {rng.choice(WORDS)}()" for _ in range(3))
    return f"@@ -10,5 +10,5 @@\n{body}\n-old_{rng.choice(WORDS)} = 1\n+new_{rng.choice(WORDS)} = 2\n{body}\n"


def turn_events(rng: random.Random, turn: int, output_bytes: int) -> list[Any]:
    """One turn as the driver emits it live."""
    tid = f"turn-{turn:05d}"
    path = f"src/{rng.choice(WORDS)}_{turn % 37}.py"
    out_text = _output(rng, output_bytes)
    return [
        UserPrompt("", f"Prompt {turn}: {_sentence(rng, 12)}", turn, True),
        TurnStarted(tid),
        Reasoning(f"rs-{turn}", _sentence(rng, 25)),
        CommandStarted(f"cmd-{turn}", "pytest -q", "/work/project"),
        CommandFinished(f"cmd-{turn}", "pytest -q", out_text, 0, 1234, "completed"),
        FileChanges(f"fc-{turn}", "completed", (FileDiff(path, "update", _diff(rng, path)),)),
        AgentMessage(f"msg-{turn}", _markdown(rng, turn)),
        TokenUsage(tid, 1800, 1800 * turn),
        TurnFinished(tid, "completed", None, 4.2, (FileStat(path, "modified", 1, 1),), "a" * 64, "b" * 64),
    ]


def session_log(turns: int = 500, output_mb: float = 20.0, seed: int = 7) -> list[Any]:
    """A thread of `turns` finished turns (as ThreadLoaded would carry them), `output_mb` of output in all."""
    rng = random.Random(seed)
    per_turn = int(output_mb * 1024 * 1024 / max(turns, 1))
    events: list[Any] = []
    for t in range(1, turns + 1):
        events.extend(e for e in turn_events(rng, t, per_turn) if not isinstance(e, TurnStarted))
    return [ThreadLoaded("bench-thread-0001", tuple(events), "resumed")]
