"""``lightrag_ext`` loads no llama-index unless llama-index is used (how long the import takes is
measured in ``benchmarks/import_cost.py``, not here).

What gets imported is checked in fresh interpreters: this test process has long imported
llama-index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llama_index.core.prompts import BasePromptTemplate

from llama_index_e2rag.extract.prompts import ENTITY_EXTRACTION_TEXT, EVENT_EXTRACTION_TEXT
from llama_index_e2rag.llm.prompt_text import fill
from lightrag_ext import E2LightRAG
from lightrag_ext.layer import rag_prompt

REPO = Path(__file__).resolve().parents[2]

#: Inserts a story and answers an e2rag query with a fake LLM and embedding that need no
#: llama-index (the tests' fakes are llama-index classes), then asks for the prompts.
LLAMA_FREE_RUN = r"""
import asyncio, json, sys, tempfile, zlib
import numpy as np
from lightrag import QueryParam
from lightrag.prompt import PROMPTS
from lightrag.utils import EmbeddingFunc, Tokenizer
from lightrag_ext import E2RAG_MODE, E2LightRAG

def llama_modules():
    return sorted(m for m in sys.modules if m == "llama_index" or m.startswith("llama_index."))

class Chars:
    def encode(self, text): return [ord(c) for c in text]
    def decode(self, tokens): return "".join(map(chr, tokens))

async def embed(texts, **_):
    return np.array([np.random.default_rng(zlib.crc32(t.encode())).random(16) for t in texts])

async def llm(prompt, system_prompt=None, history_messages=None, **_):
    if "---Task: event_extraction---" in prompt:
        return json.dumps({"events": [{"title": "Harry catches the Snitch",
                                       "description": "Harry catches the Snitch.",
                                       "participants": ["Harry"]}]})
    if "---Task: query_cues---" in prompt:
        return json.dumps({"entities": ["Harry"], "events": ["catching the Snitch"]})
    if "Extract entities and relationships" in prompt:
        t = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
        return f"entity{t}Harry{t}person{t}Harry catches the Snitch.\n" + (
            PROMPTS["DEFAULT_COMPLETION_DELIMITER"])
    return "Harry caught the Snitch."

async def main():
    with tempfile.TemporaryDirectory() as folder:
        rag = E2LightRAG(working_dir=folder, llm_model_func=llm,
                         tokenizer=Tokenizer("chars", Chars()),
                         embedding_func=EmbeddingFunc(embedding_dim=16, func=embed,
                                                      max_token_size=8192, model_name="crc"),
                         entity_extract_max_gleaning=0)
        await rag.initialize_storages()
        await rag.ainsert("Harry catches the Snitch in his mouth.", ids=["story"])
        data = await rag.aquery_data("What did Harry catch?", param=QueryParam(mode=E2RAG_MODE))
        used = llama_modules()
        prompts = rag.get_prompts()
        out = {"status": data["status"], "events": len(data["data"].get("events", [])),
               "while_unused": used, "after_get_prompts": llama_modules(),
               "prompt_classes": {name: [c.__name__ for c in type(prompt).__mro__]
                                  for name, prompt in prompts.items()}}
        await rag.finalize_storages()
        for state in rag._role_llm_states.values():
            await state.wrapped.shutdown(graceful=True)
        await rag.embedding_func.func.shutdown(graceful=True)
    print("RESULT " + json.dumps(out))

asyncio.run(main())
"""


def _run(program: str) -> dict:
    """Run ``program`` in a fresh interpreter; it prints ``RESULT <json>``."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(out for out in done.stdout.splitlines() if out.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_importing_every_export_loads_no_llama_index():
    loaded = _run(
        "import sys, json\nimport lightrag_ext\nbare = sorted(sys.modules)\n"
        "from lightrag_ext import *\n"
        "print('RESULT ' + json.dumps({'bare': bare, 'all': sorted(sys.modules)}))"
    )
    assert "lightrag.lightrag" not in loaded["bare"]  # lazy, like ``import lightrag``
    assert {"lightrag_ext.rag", "lightrag_ext.query", "lightrag_ext.backfill"} <= set(loaded["all"])
    assert "llama_index_e2rag.extract.prompts" in loaded["all"]  # the shared code is used...
    # ...and none of it pulls in llama-index (every module of ours that needs it imports
    # llama_index.core, so no llama_index module at all means none of those either)
    assert [m for m in loaded["all"] if m == "llama_index" or m.startswith("llama_index.")] == []


def test_inserting_and_querying_need_no_llama_index_until_its_prompts_are_asked_for():
    result = _run(LLAMA_FREE_RUN)
    assert result["status"] == "success" and result["events"] >= 1  # the layer was built, used
    assert result["while_unused"] == []
    assert "llama_index.core.prompts" in result["after_get_prompts"]  # laziness, not absence
    for classes in result["prompt_classes"].values():
        assert "BasePromptTemplate" in classes


def test_loading_the_layer_still_checks_lightrag_first():
    """The version guard moved from ``import lightrag_ext`` to the layer's modules."""
    moved_hook = (
        "import lightrag\n"
        "async def moved(self, chunks, status=None):\n    return []\n"
        "lightrag.LightRAG._process_extract_entities = moved\n"
        "import lightrag_ext\n"
        "try:\n    {}\nexcept lightrag_ext.UnsupportedLightRAGVersion:\n"
        "    print('RESULT true')\nelse:\n    print('RESULT false')\n"
    )
    for statement in ("from lightrag_ext import E2LightRAG", "import lightrag_ext.query"):
        assert _run(moved_hook.format(statement)) is True, statement


async def test_prompts_are_the_shared_texts_as_llama_index_templates(rag_factory, tmp_path: Path):
    rag = await rag_factory(E2LightRAG, tmp_path / "rag")
    # nothing built yet: the layer fills the shared text
    assert rag_prompt(rag, "event_prompt", EVENT_EXTRACTION_TEXT) is EVENT_EXTRACTION_TEXT
    prompts = rag.get_prompts()
    assert all(isinstance(p, BasePromptTemplate) for p in prompts.values())
    assert prompts["event_prompt"].get_template() == EVENT_EXTRACTION_TEXT
    assert prompts["mention_prompt"].get_template() == ENTITY_EXTRACTION_TEXT
    assert rag.event_prompt is prompts["event_prompt"]
    assert rag_prompt(rag, "event_prompt", EVENT_EXTRACTION_TEXT) is prompts["event_prompt"]
    text = 'Harry said "{text}" {"a": 1}'
    assert rag.event_prompt.format(text=text) == fill(EVENT_EXTRACTION_TEXT, text=text)
