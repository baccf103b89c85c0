"""Keeping the store healthy: what is reachable, garbage collection, verification and repair."""
