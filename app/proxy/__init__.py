"""codexr between an app-server client (the official Codex TUI, the IDE extension, the SDK) and the real
`codex app-server`: every frame passes through unchanged except those an observer acts on (issue 19)."""
