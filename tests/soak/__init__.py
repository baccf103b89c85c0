"""Fault-injection soak of `codexr`: SIGKILLs, races, hostile store files and a full disk (not CI; see README.md)."""
