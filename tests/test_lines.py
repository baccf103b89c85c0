"""Lines line mode and the command line print alike (app/shared/lines.py): counted words agree with their number."""

from __future__ import annotations

from app.session import ThreadSummary
from app.shared.lines import retry_line, since_rewind_lines, thread_counts


def test_one_prompt_and_one_file_are_singular_in_threads_and_redo() -> None:
    """`codexr threads` said "1 prompts" and `codexr redo` "1 files changed", "1 prompts were sent"."""
    row = ThreadSummary("t", "first", prompts=1, with_snapshots=0, redo_depth=0, updated=0.0, tracking=True)
    assert thread_counts(row) == "1 prompt, 0/1 with snapshots (1 conversation-only)"
    row = ThreadSummary("t", "first", prompts=3, with_snapshots=2, redo_depth=1, updated=0.0, tracking=True)
    assert thread_counts(row) == "3 prompts, 2/3 with snapshots (1 conversation-only), redo 1"
    assert since_rewind_lines(["a.txt"], 1, "  ") == [
        "  1 file changed since the rewind (the safety snapshot keeps it):", "    a.txt",
        "  1 prompt sent on this fork since the rewind (it stays as it is)"]
    assert since_rewind_lines([], 0) == []


def test_codex_retrying_reads_the_same_in_line_mode_and_exec() -> None:
    """Line mode said `error: X (Codex retries)` where `codexr exec` said `codexr: Codex retries: X`."""
    import io

    from app.codex.events import ErrorNotice
    from app.shared.plain import Printer

    out = io.StringIO()
    Printer(out).show(ErrorNotice("Reconnecting... 2/5", True))
    assert out.getvalue() == "warning: Codex retries: Reconnecting... 2/5\n"
    assert retry_line("Reconnecting... 2/5", "stream disconnected") == (
        "Codex retries: Reconnecting... 2/5 (stream disconnected)")


def test_a_thread_whose_record_is_damaged_says_so_in_threads_and_the_app_s_list() -> None:
    """A thread whose sidecar cannot be read is listed with its prompts and no snapshot count (it has none codexr can
    use), alike on the command line and in /threads."""
    from app.tui.threads_screen import thread_label

    row = ThreadSummary("t", "first", prompts=2, with_snapshots=0, redo_depth=0, updated=0.0, tracking=False,
                        damaged="thread sidecar t.json is damaged: Expecting value")
    assert thread_counts(row) == "2 prompts, snapshots unknown (codexr's record of it is damaged)"
    assert "2 prompts · snapshots unknown (codexr's record of it is damaged)" in thread_label(row, None, now=0.0)
