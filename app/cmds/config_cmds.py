"""`codexr config`: the effective settings and where each came from, so two config files stay understandable."""

from __future__ import annotations

import argparse
from typing import Any

from .context import Context


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the `config` command."""
    help_text = "print the effective settings and where each came from (codexr.toml, config.toml, -c, ...)"
    p = sub.add_parser("config", help=help_text, description=help_text)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=_config)


def _config(ctx: Context, args: argparse.Namespace) -> int:
    """Print every setting as `key = value  # source`; the text is valid TOML for codexr.toml."""
    from config import load_config  # pydantic: only this command and configured ones pay for it

    loaded = load_config(ctx.home, overrides=args.overrides, enable=args.enable, disable=args.disable)
    if ctx.json:
        ctx.emit({
            "files": [{"path": str(path), "exists": exists} for path, exists in loaded.files],
            "settings": {o.key: {"value": o.value, "source": o.origin, "detail": o.detail}
                         for o in loaded.origins},
            "warnings": list(loaded.warnings),
        })
        return 0
    for path, exists in loaded.files:
        print(f"# {path.name}: {path}{'' if exists else ' (absent)'}")
    print("# later wins: default < config.toml < codexr.toml < -c (in order) < --enable/--disable")
    rows = [(f"{o.key} = {o.text}" if o.text else f"# {o.key} is not set", _origin_text(o.origin, o.detail))
            for o in loaded.origins]
    width = min(max(len(left) for left, _ in rows), 56)
    for left, origin in rows:
        print(f"{left.ljust(width)}  # {origin}")
    return 0


def _origin_text(origin: str, detail: str) -> str:
    """`-c key=value` as typed; a file with the fork's key name an alias was read under."""
    if origin == "-c":
        return f"-c {detail}"
    return f"{origin} ({detail})" if detail else origin
