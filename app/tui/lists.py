"""The option list the dialogs use: one that keeps its highlighted row in view when its height changes."""

from __future__ import annotations

from textual import events
from textual.widgets import OptionList


class KeptList(OptionList):
    """An OptionList whose highlight stays on screen when the list shrinks (a small terminal, a longer message)."""

    def on_resize(self, event: events.Resize) -> None:
        """Scroll the highlighted option back into view once the new size is laid out."""
        self.call_after_refresh(self.scroll_to_highlight)
