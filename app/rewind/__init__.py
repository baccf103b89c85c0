"""Rewind and redo: the conversation and the files together (flow.py is the one order all of them take)."""
