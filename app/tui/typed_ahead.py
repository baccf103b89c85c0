"""Keys typed while the splash was up (app/tui/splash.py read them), played into Textual before its own input."""

from __future__ import annotations

from collections.abc import Callable

from textual.driver import Driver


def typed_ahead_driver(base: type[Driver], take: Callable[[], bytes]) -> type[Driver]:
    """`base` (the platform's driver) that first feeds `take()`'s bytes through Textual's own input parser.

    The splash read those bytes from the terminal to show them at once; the driver's input thread, started right
    after, reads only what was typed later, so every key reaches the app once and in the order it was typed.
    """

    class TypedAheadDriver(base):  # type: ignore[valid-type, misc]
        def start_application_mode(self) -> None:
            data = take()
            if data:
                from textual._xterm_parser import XTermParser  # what the driver's input thread parses with

                parser = XTermParser()
                for event in [*parser.feed(data.decode("utf-8", "replace")), *parser.feed("")]:
                    self.process_message(event)
            super().start_application_mode()

    return TypedAheadDriver
