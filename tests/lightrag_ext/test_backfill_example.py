"""``examples/lightrag_extend_existing.py``: ``extend_existing()`` on a working dir built by plain
LightRAG, and the script itself run offline as written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from lightrag import LightRAG
from lightrag.kg.shared_storage import finalize_share_data

from lightrag_fakes import ANSWER_PREFIX, hash_embedding_func, offline_tokenizer
from lightrag_story import INSERT_KWARGS, LATE_FACET_QUERY, STORY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lightrag_extend_existing.py"


def _load_example(path: Path = EXAMPLE):
    spec = importlib.util.spec_from_file_location(path.stem, path)
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


def test_the_example_runs_offline_as_written(tmp_path: Path):
    """``python examples/lightrag_extend_existing.py`` without a key: it builds a plain LightRAG
    working directory with the labelled offline stand-in, backfills it and answers."""
    stand_in = _load_example(EXAMPLE.parent / "lightrag_offline_stand_in.py")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(TMPDIR=str(tmp_path), HF_HUB_OFFLINE="1", PYTHONPATH=str(EXAMPLE.parents[1]))
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OFFLINE STAND-IN" in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "event layer: built 1, already there 0, with failed chunks 0"
    assert stand_in.ANSWER_NOTE in lines and any(line.startswith("- peter_rabbit-chunk-") for line in lines)
    [demo] = [p for p in tmp_path.iterdir() if p.name.startswith("lightrag-demo-")]
    assert (demo / "e2rag" / "kv_store_doc_status.json").exists()  # the layer was written
