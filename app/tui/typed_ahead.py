"""Keys typed while the splash was up (app/tui/splash.py read them), played into Textual before its own input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.driver import Driver


def typed_ahead_driver(base: type[Driver], take: Callable[[], tuple[bytes, list[Any] | None]]) -> type[Driver]:
    """`base` (the platform's driver) that first feeds the bytes `take()` gives through Textual's own input parser,
    and restores the terminal settings it gives (the splash's hand-over) when the app exits.

    The splash read those bytes from the terminal to show them at once; the driver's input thread, started right
    after, reads only what was typed later, so every key reaches the app once and in the order it was typed. The
    terminal keeps the splash's settings until this driver sets its own: what Textual saves then is the splash's,
    so the terminal's own are put in their place, for the exit (a suspend saves the settings of its shell again).
    """

    class TypedAheadDriver(base):  # type: ignore[valid-type, misc]
        def start_application_mode(self) -> None:
            data, settings = take()
            if data:
                from textual._xterm_parser import XTermParser  # what the driver's input thread parses with

                parser = XTermParser()
                for event in [*parser.feed(data.decode("utf-8", "replace")), *parser.feed("")]:
                    self.process_message(event)
            super().start_application_mode()
            if settings is not None:
                self.attrs_before = settings

    return TypedAheadDriver
