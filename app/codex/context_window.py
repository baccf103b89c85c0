"""How full the model's context window is, reckoned and worded as the official Codex TUI does ("N% context left").

Codex reports, after every model response, the tokens the last request held and the model's context window
(`thread/tokenUsage/updated`). Some of every request is Codex's own instructions and tools, which the user
cannot shrink: like the official TUI, a fixed baseline is taken off both, so a fresh thread starts at 100%.
"""

from __future__ import annotations

BASELINE_TOKENS = 12_000  # the official TUI's allowance for prompts, fixed tools and room to compact
UNKNOWN = "unknown until Codex answers a prompt of this thread"


def percent_left(used: int, window: int) -> int:
    """The share of the window (after the baseline) still free, 0 to 100, rounded."""
    if window <= BASELINE_TOKENS:
        return 0
    effective = window - BASELINE_TOKENS
    remaining = max(0, effective - max(0, used - BASELINE_TOKENS))
    return round(min(100.0, max(0.0, remaining / effective * 100)))


def compact_tokens(n: int) -> str:
    """A token count in three significant digits: 950, 2.25K, 258K, 1.05M."""
    n = max(0, n)
    if n < 1000:
        return str(n)
    for divisor, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "K")):
        if n >= divisor:
            value = n / divisor
            digits = 2 if value < 10 else 1 if value < 100 else 0
            text = f"{value:.{digits}f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + suffix
    return str(n)


def context_left(used: int | None, window: int | None) -> str:
    """The status bar's words: `73% context left` ("" while Codex has not said)."""
    if used is None or not window:
        return ""
    return f"{percent_left(used, window)}% context left"


def context_detail(used: int | None, window: int | None) -> str:
    """/status's words: `73% left (70.1K used / 258K)`, or that it is not known yet."""
    if used is None or not window:
        return UNKNOWN
    return f"{percent_left(used, window)}% left ({compact_tokens(used)} used / {compact_tokens(window)})"
