"""Parsing in worker processes: every chunk comes back, in order, with no spaCy warning; a
stopped parse ends its workers."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
import warnings

import pytest
from llama_index.core.schema import TextNode

from llama_index_e2rag import background
from llama_index_e2rag.extract.base import EXTRACTION_ERROR_KEY, GRAPH_NODES_KEY
from llama_index_e2rag.extract.grounded import SPACY_MODEL, GroundedExtractor, load_spacy
from llama_index_e2rag.extract.parse_pool import parse_texts
from llama_index_e2rag.schema import NodeKind

pytestmark = [
    pytest.mark.spacy,  # every test parses with the real pipeline
    pytest.mark.skipif(
        "fork" not in multiprocessing.get_all_start_methods(), reason="workers are forked here"
    ),
]
PEOPLE = ["Holmes", "Watson", "Lestrade", "Hudson", "Moriarty", "Adler"]


def _chunks(count: int) -> list[TextNode]:
    """Chunks that differ from each other (each names its number), so none can pass for another."""
    return [
        TextNode(
            text=f"Chapter {i}. {PEOPLE[i % 6]} found letter number {i} under the door. "
            f"{PEOPLE[(i + 1) % 6]} read it aloud to {PEOPLE[(i + 2) % 6]} at {i % 12 + 1} o'clock.",
            id_=f"chunk-{i}",
        )
        for i in range(count)
    ]


def _fragments(nodes: list[TextNode]) -> list[tuple[str, list[str]]]:
    """Each chunk's id with the texts of the sentence nodes its parse gave it."""
    out = []
    for node in nodes:
        fragment = node.metadata.get(GRAPH_NODES_KEY, [])
        sentences = [n["text"] for n in fragment if n["kind"] == NodeKind.SENTENCE.value]
        out.append((node.node_id, sentences))
    return out


def test_a_multi_process_parse_of_many_chunks_loses_none_and_warns_nothing(caplog) -> None:
    """spaCy's W127 ("not all Language.pipe worker processes completed successfully") came with
    every book: the workers were forked from an asyncio executor thread, and on exit each ran
    concurrent.futures' hook, which tried to join that very thread and failed (exit code 1).
    The build path (``acall``) is the one that forked them so."""
    many, one = _chunks(60), _chunks(60)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        parsed = asyncio.run(GroundedExtractor(n_process=2, batch_size=4).acall(many))
    assert [w for w in caught if "W127" in str(w.message) or "worker" in str(w.message)] == []
    assert [r for r in caplog.records if "W127" in r.getMessage()] == []
    assert [n.node_id for n in parsed] == [f"chunk-{i}" for i in range(60)]
    GroundedExtractor(n_process=1)(one)
    assert _fragments(list(parsed)) == _fragments(one)  # every chunk got its own parse
    assert all(sentences for _, sentences in _fragments(list(parsed)))
    assert not any(EXTRACTION_ERROR_KEY in node.metadata for node in parsed)
    assert multiprocessing.active_children() == []


def test_parse_texts_gives_one_doc_per_text_in_order() -> None:
    texts = [node.text for node in _chunks(23)]
    docs = list(parse_texts(load_spacy(), SPACY_MODEL, texts, batch_size=4, n_process=2))
    assert [doc.text for doc in docs] == texts


def test_a_parse_left_early_ends_its_workers() -> None:
    texts = [node.text for node in _chunks(40)]
    docs = parse_texts(load_spacy(), SPACY_MODEL, texts, batch_size=2, n_process=2)
    next(docs)
    assert multiprocessing.active_children() != []
    docs.close()
    assert multiprocessing.active_children() == []


def test_a_stopped_parse_job_raises_interrupted_and_ends_its_workers() -> None:
    """What a Ctrl-C does to a build (``run_sync`` calls ``stop_all``)."""
    texts = [node.text for node in _chunks(400)]
    started = threading.Event()

    def parse() -> int:
        count = 0
        for _ in parse_texts(load_spacy(), SPACY_MODEL, texts, batch_size=2, n_process=2):
            count += 1
            started.set()
        return count

    async def run() -> int:
        job = asyncio.ensure_future(background.in_thread(parse))
        while not started.is_set() and not job.done():  # a failed parse must not hang
            await asyncio.sleep(0.05)
        background.stop_all(wait=30)
        return await job

    with pytest.raises(background.Interrupted):
        asyncio.run(run())
    assert multiprocessing.active_children() == []
