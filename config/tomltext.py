"""A value as TOML source text: defaults in docs, the offending value in errors, a profile's settings as `-c`.

Written here: tomllib only reads, and the one writer on PyPI (tomli-w) keeps its inline form private.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, time
from typing import Any

#: A key TOML takes unquoted.
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_text(value: Any) -> str:
    """Render a value as TOML source text (inline: an inline table for a dict); repr for what TOML has no form of."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # JSON's string escapes are TOML basic-string escapes; DEL, which JSON leaves raw, TOML takes escaped only
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_text(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(key)} = {toml_text(item)}" for key, item in value.items()) + " }"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return repr(value)


def toml_key(key: object) -> str:
    """A key as TOML writes it: bare where it can be, else quoted."""
    text = str(key)
    return text if BARE_KEY.fullmatch(text) else json.dumps(text, ensure_ascii=False)
