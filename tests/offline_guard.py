"""Child processes that fail loudly if anything reaches for OpenAI.

LlamaIndex resolves ``Settings.llm`` / ``Settings.embed_model`` to OpenAI's lazily, by importing
``llama_index.llms.openai`` (or ``.embeddings.openai``) at first use; without the package that is
an ``ImportError``, without a key a ``ValueError``, and either may be caught and hidden by the
caller. ``guarded_env`` gives a child process a ``sitecustomize`` whose import hook refuses those
modules (and ``openai`` itself) and prints ``REACH_MARKER`` to stderr first, so a reach is seen
even where the error is swallowed. The environment has no ``OPENAI_API_KEY`` and no network
hub access.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REACH_MARKER = "E2RAG-TEST-OPENAI-REACH"

_SITECUSTOMIZE = f'''
import importlib.abc, sys

class _RefuseOpenAI(importlib.abc.MetaPathFinder):
    PREFIXES = ("llama_index.llms.openai", "llama_index.embeddings.openai", "openai")

    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in self.PREFIXES):
            sys.stderr.write("{REACH_MARKER} %s\\n" % name)
            sys.stderr.flush()
            raise ImportError("%s is blocked in this test (no OpenAI offline)" % name)
        return None

sys.meta_path.insert(0, _RefuseOpenAI())
'''


def guarded_env(folder: Path) -> dict[str, str]:
    """The environment of a guarded child process (``folder`` receives its sitecustomize)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    env["HF_HUB_OFFLINE"] = env["TRANSFORMERS_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable
