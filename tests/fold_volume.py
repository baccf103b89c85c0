"""A mounted case- and Unicode-form-insensitive volume (tests/foldfs.py) for the tests of names on such volumes,
or the reason one cannot be mounted here (then those tests skip and say why)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).parents[1]


def missing() -> str | None:
    """Why no folding volume can be mounted here (None: it can)."""
    if sys.platform != "linux":
        return "the folding volume is a Linux FUSE file system"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if shutil.which("fusermount3") is None:
        return "fuse3 is not installed (apt-get install fuse3; bootstrap.py test installs it where it can)"
    if importlib.util.find_spec("mfusepy") is None:
        return "mfusepy is not installed (the test extras of pyproject.toml)"
    return None


@contextlib.contextmanager
def folding_volume(base: Path, links: bool = True) -> Iterator[Path]:
    """Mount a folding volume over `base/backing` at `base/volume` for the block; yields the mount point. Without
    `links`: no hard links and no rename that refuses to replace, as on exFAT."""
    backing, mount = base / "backing", base / "volume"
    backing.mkdir()
    mount.mkdir()
    log = (base / "foldfs.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "tests.foldfs", str(backing), str(mount),
                             *([] if links else ["--no-links"])], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(mount):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the folding volume did not mount: {(base / 'foldfs.log').read_text()}")
            time.sleep(0.05)
        yield mount
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mount)], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
