"""Change detection of a workspace: what may have changed since the last capture, without reading every file.

Nothing is imported here: the change monitor's process (monitor_daemon.py) loads only what it needs.
"""
