"""Copied as ``conftest.py`` into LightRAG's extracted tests: records, once collection is done,
which class each test module's ``LightRAG`` really is and where ``lightrag`` / ``lightrag_ext``
were imported from, so ``lightrag_ext/test_rag_upstream_suite.py`` can check the run used
``E2LightRAG`` rather than trusting the text rewrite alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

PROBE_ENV = "LIGHTRAG_UPSTREAM_PROBE"


def pytest_collection_finish(session: pytest.Session) -> None:
    import lightrag

    import lightrag_ext

    bound: dict[str, str] = {}
    for item in session.items:
        module = getattr(item, "module", None)
        cls = getattr(module, "LightRAG", None)
        if module is not None and cls is not None:
            bound[module.__name__] = f"{cls.__module__}.{cls.__qualname__}"
    record = {
        "lightrag": lightrag.__file__,
        "lightrag_ext": lightrag_ext.__file__,
        "module_lightrag": bound,
    }
    Path(os.environ[PROBE_ENV]).write_text(json.dumps(record), encoding="utf-8")
