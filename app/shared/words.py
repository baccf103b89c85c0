"""Counted words, spelled once for every front end and command (a leaf: the service layers import it too)."""

from __future__ import annotations

from snapshot_store.words import plural as plural  # one spelling for the store's messages and the front ends
