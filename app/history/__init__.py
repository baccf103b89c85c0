"""Read-only history of every Codex session: rollout reader, catalog with fork chains, search, index."""
