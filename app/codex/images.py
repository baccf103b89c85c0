"""Images sent with a prompt (`codexr -i FILE`, a pasted image path): checked before anything is sent.

Codex takes a local image as a `localImage` input item and reads the file itself; a missing or unreadable file
would reach it as a broken attachment, so each path is checked first and a bad one is one error line, nothing sent.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import SessionError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
# The first bytes of each format: a file named .png that holds text is no image.
_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def check_images(paths: Sequence[str]) -> None:
    """Raise SessionError naming the first path that is not a readable image file (PNG, JPEG, GIF or WebP)."""
    for path in paths:
        problem = _problem(path)
        if problem is not None:
            raise SessionError(f"cannot attach image {path}: {problem}")


def _problem(path: str) -> str | None:
    p = Path(path)
    if not p.exists():
        return "no such file"
    if not p.is_file():
        return "not a file"
    try:
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not (head.startswith(_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
        return "not a PNG, JPEG, GIF or WebP image"
    return None


def prompt_input(text: str, images: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The `turn/start` input of a prompt: its text, then each image as a `localImage` item (absolute path)."""
    return [{"type": "text", "text": text}, *({"type": "localImage", "path": os.path.abspath(p)} for p in images)]


def image_label(path: str) -> str:
    """How an attached image shows in the composer and the transcript: `[image: name.png]`."""
    return f"[image: {os.path.basename(path)}]"


def with_labels(text: str, images: Sequence[str]) -> str:
    """The prompt as the transcript shows it: its text and a label for each image it does not name already."""
    labels = [image_label(p) for p in images if image_label(p) not in text]
    return "\n".join(part for part in (text, *labels) if part)


def pasted_image(pasted: str, cwd: str) -> str | None:
    """The image file a paste names (a path, quoted or shell-escaped, or a file:// URL), absolute; None otherwise.

    Terminals paste a dragged file as its path; only an existing file with an image suffix counts, so pasting
    ordinary text (or a path to a source file) stays text.
    """
    text = pasted.strip()
    if not text or "\n" in text:
        return None
    if text.startswith("file://"):
        text = unquote(urlparse(text).path)
    else:
        try:
            words = shlex.split(text)
        except ValueError:
            return None
        if len(words) != 1:
            return None
        text = words[0]
    path = os.path.join(cwd, os.path.expanduser(text))
    if not path.lower().endswith(IMAGE_SUFFIXES) or not os.path.isfile(path):
        return None
    return os.path.abspath(path)
