"""A unified diff rendered with Rich's Syntax (never colour alone: +/- markers stay visible)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Static

from ..codex.events import FileStat

if TYPE_CHECKING:  # rich.syntax pulls in pygments (~25 ms): loaded with the first diff, not before the first frame
    from rich.syntax import Syntax


def stat_label(st: FileStat) -> str:
    """`M src/app.py +3 -1` — change letter, path and line counts (when known)."""
    letter = {"added": "A", "deleted": "D", "modified": "M", "mode": "m", "type": "T"}.get(st.change, "?")
    counts = f" +{st.added} -{st.removed}" if st.added is not None and st.removed is not None else ""
    return f"{letter} {st.path}{counts}"


class DiffView(Static):
    """A unified diff, syntax-highlighted as `diff`."""

    DEFAULT_CSS = """
    DiffView { height: auto; }
    """

    def __init__(self, diff: str, **kwargs: object) -> None:
        super().__init__(self._render_diff(diff), **kwargs)  # type: ignore[arg-type]

    @staticmethod
    def _render_diff(diff: str) -> Syntax:
        from rich.syntax import Syntax

        return Syntax(diff.rstrip("\n") or "(no textual change)", "diff", theme="ansi_dark", word_wrap=True,
                      background_color="default")

    def show(self, diff: str) -> None:
        """Replace the diff shown."""
        self.update(self._render_diff(diff))
