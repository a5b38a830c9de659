"""The example's extend_existing() works on a working dir built by plain LightRAG."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lightrag import LightRAG
from lightrag.kg.shared_storage import finalize_share_data

from lightrag_fakes import ANSWER_PREFIX, hash_embedding_func, offline_tokenizer
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, STORY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lightrag_extend_existing.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("lightrag_extend_existing", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_extend_existing_backfills_and_answers(rag_factory, lightrag_llm, tmp_path: Path):
    plain = await rag_factory(LightRAG, tmp_path / "existing")
    await plain.ainsert(STORY, ids=["story"], **INSERT_KWARGS)
    await rag_factory.close(plain)

    example = _load_example()
    report, result = await example.extend_existing(
        str(tmp_path / "existing"),
        LATE_FACET_QUERY,
        llm_model_func=lightrag_llm,
        embedding_func=hash_embedding_func(),
        tokenizer=offline_tokenizer(),
    )
    finalize_share_data()
    assert report.built == ["story"]
    assert result["llm_response"]["content"].startswith(ANSWER_PREFIX)
    assert result["data"]["chunks"][0]["chunk_id"] == "story-chunk-002"
