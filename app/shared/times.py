"""Times as codexr shows them, one convention everywhere: local time with its UTC offset on screen
(`2026-12-01 21:04 +0100`), ISO 8601 with its offset in --json (`2026-12-01T21:04:05.123+01:00`).

Internally times stay as they came (epoch seconds from our store, ISO strings in UTC from Codex's rollouts);
they are converted only here, at the edge, so a reader never has to guess which clock a line uses.
"""

from __future__ import annotations

import datetime as dt

Moment = float | int | str | None
"""A time as codexr holds one: epoch seconds, an ISO 8601 string (Codex writes `…Z`), or nothing."""


def moment(value: Moment) -> dt.datetime | None:
    """`value` as an aware datetime in the local zone (None for no time, or one no calendar holds: a damaged
    record says what it likes)."""
    try:
        if isinstance(value, bool) or value is None or value == "":
            return None
        if isinstance(value, int | float):
            return dt.datetime.fromtimestamp(float(value), dt.UTC).astimezone()
        when = dt.datetime.fromisoformat(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)  # Codex writes UTC; a time without a zone is taken as UTC
        return when.astimezone()
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def screen_time(value: Moment, *, seconds: bool = False) -> str:
    """On screen: local time with its offset, to the minute (or second): `2026-12-01 21:04 +0100` ("?" if unknown)."""
    when = moment(value)
    if when is None:
        return "?"
    return when.strftime("%Y-%m-%d %H:%M:%S %z" if seconds else "%Y-%m-%d %H:%M %z")


def json_time(value: Moment) -> str | None:
    """In --json: ISO 8601 with the local offset, to the millisecond (None when unknown)."""
    when = moment(value)
    return None if when is None else when.isoformat(timespec="milliseconds")
