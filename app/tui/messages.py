"""Typed Textual messages: how the session core's events reach widgets on the UI thread."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class DriverEvent(Message):
    """One event from app/events.py, posted by the driver's threads (App.post_message is thread-safe)."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event
