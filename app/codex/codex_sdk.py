"""The official Codex SDK, imported with its ~1,000 generated pydantic models built on first use, not at import.

`openai_codex.generated.v2_all` defines every app-server protocol type (1,054 classes); pydantic builds each
model's validator and serializer when its class statement runs (~40% of importing the SDK, profiled), and the
SDK is imported by every `codexr exec` before Codex is even started. pydantic's documented `defer_build` config
option postpones that work to a model's first validation; a session validates a few dozen models. Generated
code cannot be given the option without editing it, so while (and only while) the module runs, pydantic's two
root classes carry `defer_build=True`, which pydantic's documented config inheritance hands to every class the
module defines (and which they keep: `model_config` is merged into each class). The root classes get their own
configs back afterwards. Measured on the pinned openai-codex 0.163.0 / pydantic 2.14.4 (2 shared cores):
`import app.session` 1.75-2.17 s -> 1.32-1.54 s (`-X importtime`, 5 runs each); a deferred model's first
validation 30-50 ms; a whole `codexr exec` 0.72-0.90x of before (bench/bench_startup.py). What is left of the
import (~0.8 s here) is pydantic collecting the 1,054 classes' fields (evaluating their string annotations).

Setting `BaseModel.model_config` is not pydantic API: `lazy_models_usable()` checks what this relies on and,
if anything differs, the SDK is imported as it always was (slower, same behaviour);
tests/test_codex_sdk.py fails loudly if that fallback is taken with the pinned versions.
"""

from __future__ import annotations

import sys
import threading

V2_MODULE = "openai_codex.generated.v2_all"
_lock = threading.Lock()
lazy_models: bool = False
"""True when this process imported the SDK's models with `defer_build` (see the module docstring)."""


def lazy_models_usable() -> str | None:
    """Why the deferred build cannot be used here (None when it can): what pydantic must offer for it."""
    import pydantic
    from pydantic import BaseModel, ConfigDict, RootModel

    if not pydantic.VERSION.startswith("2."):
        return f"pydantic {pydantic.VERSION} is not 2.x"
    if "defer_build" not in ConfigDict.__annotations__:
        return "pydantic's ConfigDict has no defer_build"
    for cls in (BaseModel, RootModel):
        if not isinstance(cls.__dict__.get("model_config"), dict):
            return f"pydantic.{cls.__name__} has no model_config dict of its own"
    return None


def _import_models() -> None:
    """Import the generated models module with `defer_build` inherited from pydantic's root classes."""
    global lazy_models
    with _lock:
        if V2_MODULE in sys.modules or lazy_models_usable() is not None:
            return
        from pydantic import BaseModel, RootModel

        saved = {cls: cls.__dict__["model_config"] for cls in (BaseModel, RootModel)}
        try:
            for cls, config in saved.items():
                deferred = config.copy()
                deferred["defer_build"] = True
                cls.model_config = deferred
            import openai_codex.generated.v2_all  # noqa: F401
        finally:
            for cls, config in saved.items():
                cls.model_config = config
        lazy_models = True


_import_models()

from openai_codex.client import CodexClient as CodexClient  # noqa: E402
from openai_codex.client import CodexConfig as CodexConfig  # noqa: E402
from openai_codex.errors import CodexError as CodexError  # noqa: E402
from openai_codex.errors import JsonRpcError as JsonRpcError  # noqa: E402
from openai_codex.errors import TransportClosedError as TransportClosedError  # noqa: E402
from openai_codex.generated.v2_all import ThreadSourceKind as ThreadSourceKind  # noqa: E402
