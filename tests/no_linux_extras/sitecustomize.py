"""Loaded by a Python started with this directory on PYTHONPATH: that Python lacks what Linux adds to the standard
library and what macOS lacks (os.pipe2, os.pidfd_open, os.O_PATH, socket.SO_PEERCRED, socket.SOCK_CLOEXEC,
inotify_simple), so the flows that must also run on a Mac are proven here not to reach for them unchecked
(issue 32 §2)."""

import _socket
import os
import socket
import sys

for name in ("pipe2", "pidfd_open", "O_PATH"):
    if hasattr(os, name):
        delattr(os, name)
for module in (_socket, socket):
    for name in ("SO_PEERCRED", "SOCK_CLOEXEC"):
        if hasattr(module, name):
            delattr(module, name)
sys.modules["inotify_simple"] = None  # type: ignore[assignment]  # import raises ImportError, as where absent

if os.environ.get("CODEXR_TEST_NO_PROC_NET") == "1":  # nor Linux's list of TCP connections and their users
    import pathlib

    _isfile, _read_text = os.path.isfile, pathlib.Path.read_text

    def _no_proc_net_isfile(path: object) -> bool:
        return False if str(path).startswith("/proc/net/") else _isfile(path)  # type: ignore[arg-type]

    def _no_proc_net_read_text(self: pathlib.Path, *args: object, **kwargs: object) -> str:
        if str(self).startswith("/proc/net/"):
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return _read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    os.path.isfile = _no_proc_net_isfile  # type: ignore[assignment]
    pathlib.Path.read_text = _no_proc_net_read_text  # type: ignore[method-assign,assignment]
