"""Talking to Codex: the SDK and the binary, one app-server connection, its events and their translation, the
scripted model that stands in for a provider offline."""
