"""Run one blocking Driver call in a thread worker; the result comes back as a message, never a widget touch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.dom import DOMNode
from textual.message import Message

from snapshot_store import StoreError


class CallDone(Message, bubble=False):
    """A Driver call finished: `value` on success, `error` (one line for the user) on failure."""

    def __init__(self, tag: Any, value: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.tag = tag
        self.value = value
        self.error = error


def call(node: DOMNode, tag: Any, fn: Callable[[], Any]) -> None:
    """Run `fn` off the event loop; post `CallDone(tag, …)` to `node` when it ends (errors included)."""

    def run() -> None:
        try:
            value = fn()
        except StoreError as exc:  # SessionError and Busy are StoreErrors: one line for the user
            node.post_message(CallDone(tag, error=str(exc)))
        except Exception as exc:  # a dialog shows every failure; it never crashes the app
            node.post_message(CallDone(tag, error=f"{type(exc).__name__}: {exc}"))
        else:
            node.post_message(CallDone(tag, value))

    node.run_worker(run, thread=True, group="driver", exit_on_error=False)
