"""Anchoring at story scale on the real offline default (spaCy + MiniLM), issue 28 §2 and §6.

Three original novel-like stories (``novel_stories``): chapters with headings, a family sharing
a surname, a heroine whose early facet comes before a named incident and whose later facet comes
1,000-5,000 words after it, in a later chapter. The rules tested, in ``narrative`` and in
``entity_event``:

* *after X* ranks the later facet above the earlier one; *before X* the earlier above the later;
* a question with no time word ranks exactly the same with anchoring on or off;
* an anchor the story does not hold (a weak match) is reported as not used and costs nothing:
  the ranking is the one without anchoring;
* every result of an anchored question carries ``metadata["anchor"]``: the passage holding the
  incident, its chapter, its confidence, used or not, and a region starting at the anchor;
* ``e2rag query --explain`` prints that anchor once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core import Document
from llama_index.core.schema import NodeWithScore

from llama_index_e2rag.context.keys import ANCHOR_KEY, SIGNALS_KEY
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.text import count_words

from novel_stories import VARIANTS, Story, build

REPO = Path(__file__).resolve().parents[2]
NAMES = [v.name for v in VARIANTS]
MODES = ("narrative", "entity_event")


@pytest.fixture(scope="module")
def novels(offline) -> dict[str, tuple[Story, E2RAGIndex]]:
    """Each story indexed once with the offline default (no extractors given: spaCy)."""
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    embed = MiniLMEmbedding()
    built = {}
    for variant in VARIANTS:
        story = build(variant)
        document = Document(text=story.text, id_=variant.name,
                            metadata={"file_name": f"{variant.name}.txt"})
        built[variant.name] = (story, E2RAGIndex.from_documents([document], embed_model=embed))
    return built


def _everything(index: E2RAGIndex, mode: str, question: str, **kwargs) -> list[NodeWithScore]:
    """A deep ranking (enough results to hold both facets)."""
    return index.as_retriever(mode=mode, similarity_top_k=40, **kwargs).retrieve(question)


def _rank_of(results: list[NodeWithScore], text: str, at: int) -> int:
    """Rank (0-based) of the first result holding the start of the facet starting at ``at``."""
    end = at + len(text)
    for rank, r in enumerate(results):
        start, stop = r.node.start_char_idx, r.node.end_char_idx
        if start is not None and start < end and stop > at:
            return rank
    return len(results)


def test_the_facets_are_chapters_and_thousands_of_words_apart(novels):
    for story, _ in novels.values():
        between = count_words(story.text[story.incident_at : story.later_at])
        assert 1_000 <= between <= 5_000
        assert 1_000 <= count_words(story.text[story.early_at : story.later_at]) <= 6_500
        chapters = story.text[story.incident_at : story.later_at].count("CHAPTER ")
        assert chapters >= 1
        assert story.text.count(story.variant.incident_scene) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_after_ranks_the_later_facet_above_the_earlier(novels, name, mode):
    story, index = novels[name]
    v = story.variant
    results = _everything(index, mode, v.after_question)
    later = _rank_of(results, v.later, story.later_at)
    early = _rank_of(results, v.early, story.early_at)
    assert later < len(results), "the later facet must be retrieved"
    assert later < early


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_before_ranks_the_earlier_facet_above_the_later(novels, name, mode):
    story, index = novels[name]
    v = story.variant
    results = _everything(index, mode, v.before_question)
    early = _rank_of(results, v.early, story.early_at)
    assert early < len(results), "the early facet must be retrieved"
    assert early < _rank_of(results, v.later, story.later_at)


def _ranking(results: list[NodeWithScore]) -> list[tuple[str, float]]:
    return [(r.node.node_id, round(r.score, 6)) for r in results]


def _switched_off(mode: str) -> dict:
    return {"disable": ("anchor",)} if mode == "narrative" else {"anchor_weight": 0.0}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_a_question_without_a_time_word_is_unchanged_by_anchoring(novels, name, mode):
    story, index = novels[name]
    question = story.variant.plain_question
    on = _everything(index, mode, question)
    off = _everything(index, mode, question, **_switched_off(mode))
    assert _ranking(on) == _ranking(off)
    assert not any(ANCHOR_KEY in r.node.metadata for r in on)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_an_anchor_the_story_does_not_hold_is_not_used_and_costs_nothing(novels, name, mode):
    story, index = novels[name]
    question = story.variant.weak_question
    on = _everything(index, mode, question)
    record = on[0].node.metadata[ANCHOR_KEY]
    assert record["used"] is False
    assert all(r.node.metadata[ANCHOR_KEY] == record for r in on)
    off = _everything(index, mode, question, **_switched_off(mode))
    assert _ranking(on) == _ranking(off)
    assert not any(r.node.metadata[SIGNALS_KEY].get("anchor") for r in on)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_every_result_of_an_anchored_question_names_the_anchor_and_its_region(
    novels, name, mode
):
    story, index = novels[name]
    v = story.variant
    results = _everything(index, mode, v.after_question)
    records = [r.node.metadata[ANCHOR_KEY] for r in results]
    assert all(record == records[0] for record in records)
    record = records[0]
    anchor_passage = index.graph_store.get_nodes([record["passage_id"]])[0]
    scene = (story.incident_at, story.incident_at + len(v.incident_scene))
    assert scene[0] <= anchor_passage.span[0] < scene[1], "the anchor is the incident's passage"
    assert record["used"] is True and 0.5 <= record["confidence"] <= 1.0
    assert record["relation"] == "after" and record["clause"] == v.incident
    heading = story.text.rfind("CHAPTER ", 0, story.incident_at)
    numeral = story.text[heading + len("CHAPTER ") : story.text.index(".", heading)]
    assert record["where"]["chapter"] == f"Chapter {numeral}"
    assert record["where"]["percent"] == pytest.approx(
        100 * anchor_passage.span[0] / len(story.text.rstrip()), abs=1.0
    )
    assert record["text"].split()[:3] == anchor_passage.text.split()[:3]
    region = record["region"]
    assert region["start"]["char_offset"] == anchor_passage.span[0]
    assert region["end"]["char_offset"] > region["start"]["char_offset"]


def test_explain_prints_the_anchor_once_through_the_real_cli(novels, tmp_path):
    story, _ = novels["vane"]
    v = story.variant
    (tmp_path / "vane.txt").write_text(story.text, encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }

    def e2rag(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "llama_index_e2rag.cli", *argv], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=600,
        )

    store = str(tmp_path / "store")
    assert e2rag("index", str(tmp_path / "vane.txt"), "--store", store, "--quiet").returncode == 0
    for mode in MODES:
        done = e2rag("query", v.after_question, "--store", store, "--mode", mode, "--explain",
                     "--quiet")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        anchors = [line for line in lines if line.startswith("anchor (after")]
        assert len(anchors) == 1
        assert f'"{v.incident}"' in anchors[0] and "used" in anchors[0]
        assert "not used" not in anchors[0] and "region" in anchors[0]
        heading = story.text.rfind("CHAPTER ", 0, story.incident_at)
        numeral = story.text[heading + len("CHAPTER ") : story.text.index(".", heading)]
        assert f"Chapter {numeral} " in anchors[0]
        plain = e2rag("query", v.plain_question, "--store", store, "--mode", mode, "--explain",
                      "--quiet")
        assert plain.returncode == 0 and "anchor (" not in plain.stdout
