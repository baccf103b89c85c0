"""The main screen's footer: on a narrow terminal, whole keys give way (F1 Help last) instead of being cut."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

NARROW = 100  # below this many columns: compact keys, no palette hint, and only the keys that fit


class AppFooter(Footer):
    """Textual's footer, compact below NARROW columns, where keys past the width are dropped, never cut."""

    def __init__(self) -> None:
        super().__init__()
        self._width = 0

    def on_resize(self, event: events.Resize) -> None:
        """A new terminal width: compact or not, and which keys fit."""
        if event.size.width == self._width:
            return
        self._width = event.size.width
        narrow = self._width < NARROW
        self.compact = narrow
        self.show_command_palette = not narrow
        self.refresh(recompose=True)

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Redraw the keys only while this footer's screen is on top: under a dialog they were recomposed (~70-100 ms
        here) and again when it closed, in the middle of the dialog's first frames (bench_tui.py, Ctrl+R)."""
        if self.is_attached and self.screen is not self.app.screen:
            self._bindings_ready = True
            return
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        """The keys Textual's footer shows; when compact, the later ones go until the rest fits (F1 Help stays)."""
        items = list(super().compose())
        if not self.compact or not self._width:
            yield from items
            return
        keys = [w for w in items if isinstance(w, FooterKey)]

        def width(k: FooterKey) -> int:  # a compact key: `^r Rewind` and a one-column margin
            return cell_len(k.key_display) + 1 + cell_len(k.description) + 1

        while len(keys) > 1 and sum(map(width, keys)) > self._width:
            drop = next((k for k in reversed(keys) if k.action != "help"), keys[-1])
            keys.remove(drop)
            items.remove(drop)
        yield from items
