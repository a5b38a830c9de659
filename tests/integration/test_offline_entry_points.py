"""No entry point of ours reaches for OpenAI without a key, and LlamaIndex's own composition
(``RetrieverQueryEngine``, ``QueryFusionRetriever``) works offline the documented way.

Each check runs in a child process whose import hook refuses ``llama_index.llms.openai``,
``llama_index.embeddings.openai`` and ``openai`` and marks any attempt on stderr
(``offline_guard.py``): LlamaIndex's ``Settings.llm`` builds OpenAI's LLM lazily, so a hidden
``Settings.llm`` read anywhere shows up here, even if the error it raises is caught. The store is
built by the real CLI with the offline default (MiniLM, spaCy) and every LLM-free layer.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from offline_guard import PYTHON, REACH_MARKER, REPO, guarded_env

#: they run the offline default: spaCy parses, MiniLM embeds
pytestmark = [pytest.mark.spacy, pytest.mark.minilm]

SAMPLE = REPO / "llama_index_e2rag" / "data" / "peter_rabbit.txt"
QUESTION = "Where did Peter lose his shoes?"


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert REACH_MARKER not in done.stderr, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    work = tmp_path_factory.mktemp("guarded")
    env = guarded_env(work / "guard")
    env["XDG_STATE_HOME"] = str(work / "state")
    return env, work


@pytest.fixture(scope="module")
def store(guarded) -> Path:
    env, work = guarded
    target = work / "store"
    done = _run(
        [PYTHON, "-m", "llama_index_e2rag.cli", "index", str(SAMPLE), "--store", str(target),
         "--chrono", "--sentence-graph", "--event-graph", "--quiet"],
        env, work,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return target


def _python(code: str, guarded, store: Path) -> str:
    env, work = guarded
    done = _run([PYTHON, "-c", textwrap.dedent(code), str(store)], env, work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout[-2000:]
    return done.stdout


def test_the_guard_sees_a_reach(guarded) -> None:
    """The check can fail: LlamaIndex's own default LLM lookup is caught."""
    env, work = guarded
    code = "from llama_index.core import Settings\ntry:\n    Settings.llm\nexcept Exception:\n    pass"
    done = subprocess.run([PYTHON, "-c", code], env=env, cwd=work, capture_output=True,
                          text=True, timeout=300)
    assert REACH_MARKER in done.stderr


def test_the_index_answers_in_every_mode_and_hyde_fails_in_one_line(guarded, store) -> None:
    _python(
        f"""
        import sys
        from llama_index.core import StorageContext, load_index_from_storage
        from llama_index_e2rag.errors import MissingModelError
        from llama_index_e2rag.modes import HYDE_VARIANTS, RETRIEVER_MODES

        from llama_index_e2rag import E2RAGIndex  # registers the index type with llama-index
        index = load_index_from_storage(StorageContext.from_defaults(persist_dir=sys.argv[1]))
        q = {QUESTION!r}
        for mode in RETRIEVER_MODES:
            assert index.as_retriever(mode=mode).retrieve(q), mode
            assert str(index.as_query_engine(mode=mode).query(q)).strip(), mode
            assert str(index.as_chat_engine(mode=mode).chat(q)).strip(), mode
        for variant in HYDE_VARIANTS:
            for build in (lambda: index.as_retriever(mode="entity_event", hyde=variant),
                          lambda: index.as_query_engine(mode="entity_event", hyde=variant)):
                try:
                    target = build()
                    (target.retrieve if hasattr(target, "retrieve") else target.query)(q)
                except MissingModelError as exc:
                    assert "\\n" not in str(exc), exc
                else:
                    raise AssertionError("hyde without an LLM did not say it needs one")
        print("ok")
        """,
        guarded, store,
    )


def test_llamaindex_composition_works_offline_the_documented_way(guarded, store) -> None:
    _python(
        f"""
        import sys
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index_e2rag import ExtractiveSynthesizer, NoLLM, load_index

        index = load_index(sys.argv[1])
        q = {QUESTION!r}
        retriever = index.as_retriever()
        synth = ExtractiveSynthesizer.from_index(index)
        assert "shoes" in str(RetrieverQueryEngine(retriever, response_synthesizer=synth).query(q))
        engine = RetrieverQueryEngine.from_args(retriever, llm=NoLLM(), response_synthesizer=synth)
        assert "shoes" in str(engine.query(q))
        fusion = QueryFusionRetriever([retriever, index.as_retriever(mode="grounded")],
                                      llm=NoLLM(), num_queries=1, mode="reciprocal_rerank")
        assert fusion.retrieve(q)
        assert "shoes" in str(RetrieverQueryEngine(fusion, response_synthesizer=synth).query(q))
        print("ok")
        """,
        guarded, store,
    )


def test_the_server_answers_offline(guarded, store) -> None:
    _python(
        f"""
        import sys
        from pathlib import Path
        from fastapi.testclient import TestClient
        from llama_index_e2rag.cli.store import load_store
        from llama_index_e2rag.app.server import create_app

        with TestClient(create_app(load_store(Path(sys.argv[1])), sys.argv[1])) as client:
            for mode in ("narrative", "grounded", "event_graph"):
                body = client.post("/query", json={{"query": {QUESTION!r}, "mode": mode}})
                assert body.status_code == 200 and body.json()["answer"], body.text
            body = client.post("/query", json={{"query": {QUESTION!r}, "hyde": "hyp_embedding"}})
            assert body.status_code >= 400 and "LLM" in body.text, body.text
        print("ok")
        """,
        guarded, store,
    )


@pytest.mark.parametrize("mode", ["narrative", "sentence_graph"])
def test_the_cli_answers_offline(guarded, store, mode) -> None:
    env, work = guarded
    done = _run([PYTHON, "-m", "llama_index_e2rag.cli", "query", "--store", str(store),
                 "--mode", mode, "--quiet", QUESTION], env, work)
    assert done.returncode == 0 and "shoes" in done.stdout, done.stderr[-3000:]


def test_the_cli_says_hyde_needs_an_llm_in_one_line(guarded, store) -> None:
    env, work = guarded
    done = _run([PYTHON, "-m", "llama_index_e2rag.cli", "query", "--store", str(store),
                 "--hyde", "hyp_extraction", "--quiet", QUESTION], env, work)
    assert done.returncode != 0
    assert done.stderr.strip().startswith("e2rag: error:") and "LLM" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_demo_runs_offline(guarded, store) -> None:
    env, work = guarded
    done = _run([PYTHON, "-m", "llama_index_e2rag.cli", "demo", "--store",
                 str(work / "demo")], env, work)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
