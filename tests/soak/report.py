"""The results table: per operation, trials, faults, files lost, verify failures, writes outside."""

from __future__ import annotations

from collections import Counter
from typing import Any


def summarize(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per operation; `checks` counts the trials each check failed in."""
    rows = []
    for op, trials in results.items():
        checks: Counter[str] = Counter()
        warnings: Counter[str] = Counter()
        for t in trials:
            checks.update(t.get("failures", {}).keys())
            warnings.update(t.get("warnings", {}).keys())
        rows.append({
            "op": op,
            "trials": len(trials),
            "faults": sum(int(t.get("faults", 1 if t.get("killed") else 0)) for t in trials),
            "files_lost": sum(int(t.get("files_lost", 0)) for t in trials),
            "verify_failures": sum(1 for t in trials if "verify_full" in t.get("failures", {})),
            "writes_outside": sum(1 for t in trials if t.get("wrote_outside")),
            "failing_trials": sum(1 for t in trials if t.get("failures")),
            "checks": dict(checks),
            "warnings": dict(warnings),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown, as pasted into bench/README.md (the run it replaces moves to bench/HISTORY.md)."""
    lines = ["| operation | trials | faults | files lost | verify failures | writes outside | failing trials "
             "| failing checks (trials) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        checks = ", ".join(f"{k} ({v})" for k, v in sorted(r["checks"].items(), key=lambda kv: -kv[1])) or "-"
        lines.append(f"| {r['op']} | {r['trials']} | {r['faults']} | {r['files_lost']} | {r['verify_failures']} "
                     f"| {r['writes_outside']} | {r['failing_trials']} | {checks} |")
    return "\n".join(lines)
