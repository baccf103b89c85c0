"""Byte sizes written the way people write them ("500MB", "10GiB", "2G"), so config files stay readable."""

from __future__ import annotations

import re
from decimal import Decimal

_UNITS: dict[str, int] = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}

# A non-negative number, then an optional K/M/G/T prefix followed by an optional "B"/"iB", or a bare "B".
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(?:([kmgt])(?:i?b)?|b)?\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Turn "500MB", "10GiB", "2G", "1.5k" or "4096" into bytes (powers of 1024; fractions round down)."""
    match = _SIZE_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    number, prefix = match.group(1), (match.group(2) or "").lower()
    return int(Decimal(number) * _UNITS[prefix])


def format_size(size: int) -> str:
    """Render bytes with the largest binary unit dividing them exactly, so defaults read as "10GiB"."""
    for suffix, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size and size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)
