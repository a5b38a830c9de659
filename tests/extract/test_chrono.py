"""ChronoRAG: layer construction, neighbourhood assembling, ordering, budget and storage."""

from __future__ import annotations

import json
import math
import re

import pytest
from llama_index.core import Document, StorageContext, load_index_from_storage
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeRelationship
from hash_embedding import hash_vector
from scripted_llm import ScriptedLLM

from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.extract.chrono import (
    ChronoLayerBuilder,
    approx_token_count,
    fixed_length_spans,
    readable,
)
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.retrievers.chrono import ChronoLayerMissingError
from llama_index_e2rag.schema import EdgeKind, NodeKind, normalize_text

HARBOUR = (
    "Alice met Bob at the harbour at dawn. Bob gave Carol a brass lantern. "
    "Carol followed Dave into the pine forest. Dave showed Alice the hidden well. "
    "Alice warned Bob about the coming storm. Bob repaired the fishing boat of Carol. "
    "Carol sailed with Dave to the lighthouse. Dave lit the great lamp for Alice. "
    "Alice thanked Bob for the kindness. Bob married Carol under the chestnut tree."
)
MOUNTAIN = (
    "Erin climbed with Frank to the frozen pass. Frank lost Gwen in the blizzard. "
    "Gwen found Hugo beside a ruined chapel. Hugo carried Erin across the glacier. "
    "Erin gave Frank the silver compass. Frank guided Gwen down to the valley. "
    "Gwen told Hugo about the wolves. Hugo built Erin a stone shelter."
)
_SENTENCE = re.compile(r"[^.!?]*[.!?]")
_PASSAGE = re.compile(r"Passage:\n(.*?)\n\nSummary:", re.DOTALL)
_SUMMARY = re.compile(r"Summary:\n(.*)", re.DOTALL)


def chrono_llm(**kwargs) -> ScriptedLLM:
    """ScriptedLLM answering the two chrono kinds from the prompt text.

    Summary = the passage's complete sentences naming two characters, in order; relations = one
    per summary sentence (the sentence itself, between its first two names).
    """
    llm = ScriptedLLM(**kwargs)

    def summary(prompt: str) -> str:
        match = _PASSAGE.search(prompt)
        text = match.group(1) if match else ""
        kept = [s.strip() for s in _SENTENCE.findall(text) if len(llm.names_in(s)) >= 2]
        return " ".join(kept)

    def relations(prompt: str) -> str:
        match = _SUMMARY.search(prompt)
        text = match.group(1) if match else ""
        found = []
        for sentence in _SENTENCE.findall(text):
            names = llm.names_in(sentence)
            if len(names) >= 2:
                found.append({"source": names[0], "target": names[1],
                              "description": sentence.strip()})
        entities = sorted({n for r in found for n in (r["source"], r["target"])})
        return json.dumps({"entities": entities, "relations": found})

    llm.handlers.update(chrono_summary=summary, chrono_relations=relations)
    return llm


def build(hash_embed, docs, llm=None, **builder_kwargs) -> E2RAGIndex:
    llm = llm or chrono_llm()
    builder_kwargs.setdefault("chunk_tokens", 20)
    builder_kwargs.setdefault("group_size", 2)
    builder = ChronoLayerBuilder(LLMRunner(llm, max_retries=0, backoff=0.0), **builder_kwargs)
    return E2RAGIndex.from_documents(
        docs, llm=llm, embed_model=hash_embed, doc_builders=[builder]
    )


@pytest.fixture
def two_docs() -> list[Document]:
    return [Document(text=HARBOUR, id_="harbour"), Document(text=MOUNTAIN, id_="mountain")]


@pytest.fixture
def index(hash_embed, two_docs) -> E2RAGIndex:
    return build(hash_embed, two_docs)


def layer0(index, doc_id):
    chunks = index.graph_store.nodes(NodeKind.CHUNK, doc_id)
    return sorted((c for c in chunks if c.attrs.get("layer") == 0),
                  key=lambda c: c.attrs["chrono_index"])


def timeline(index, doc_id):
    facts = index.graph_store.nodes(NodeKind.FACT, doc_id)
    return sorted(facts, key=lambda f: f.attrs["chrono_index"])


def squash(text: str) -> str:
    return " ".join(text.split())


# -- layer 0 ----------------------------------------------------------------------------------


def test_fixed_length_spans_cover_every_word_in_order_within_the_limit():
    text = " ".join(f"w{i}" for i in range(250))
    spans = fixed_length_spans(text, 13)
    assert [text[a:b] for a, b in spans] == [
        " ".join(f"w{i}" for i in range(k, min(k + 10, 250))) for k in range(0, 250, 10)
    ]
    assert all(approx_token_count(text[a:b]) <= 13 for a, b in spans)
    # a subword counter is checked on whole spans, not only word by word
    spans = fixed_length_spans(text, 10, lambda t: len(t) / 4)
    assert all(len(text[a:b]) / 4 <= 10 for a, b in spans)
    assert squash(" ".join(text[a:b] for a, b in spans)) == text
    with pytest.raises(ValueError):
        fixed_length_spans(text, 0)


def test_layer0_is_a_separate_unembedded_chunking_mapped_by_position(index):
    chunks = layer0(index, "harbour")
    extraction = [c for c in index.graph_store.nodes(NodeKind.CHUNK, "harbour")
                  if c.attrs.get("layer") is None]
    assert len(chunks) > 3 and extraction
    assert {c.id for c in chunks}.isdisjoint(c.id for c in extraction)
    assert squash(" ".join(c.text for c in chunks)) == squash(HARBOUR)
    for i, chunk in enumerate(chunks):
        assert chunk.attrs == {"layer": 0, "chrono_index": i, "group": i // 2, "embed": False}
        assert HARBOUR[chunk.span[0]: chunk.span[1]] == chunk.text
        assert chunk.pos == (0, chunk.span[0], 0)
        assert approx_token_count(chunk.text) <= 20
        home = index.graph_store.get_node(chunk.chunk_id)
        assert home.span[0] <= chunk.span[0] < home.span[1]
    # never embedded: the chunk namespace holds only the extraction chunks
    hits = index.stores.search(NodeKind.CHUNK, hash_vector(HARBOUR), 50)
    assert {h.id for h in hits} == {c.id for c in index.graph_store.nodes(NodeKind.CHUNK)
                             if c.attrs.get("layer") is None}


# -- layer 1 with an LLM ----------------------------------------------------------------------


def test_llm_facts_follow_the_text_and_link_to_their_group(index):
    for doc_id, text in (("harbour", HARBOUR), ("mountain", MOUNTAIN)):
        facts = timeline(index, doc_id)
        chunks = layer0(index, doc_id)
        assert facts and all(f.attrs["source"] == "llm" for f in facts)
        where = [squash(text).find(squash(f.text)) for f in facts]
        assert all(w >= 0 for w in where)
        assert where == sorted(where) and len(set(where)) == len(where)
        indices = [tuple(f.attrs["narrative_index"]) for f in facts]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
        assert [f.pos for f in facts] == sorted(f.pos for f in facts)
        for fact in facts:
            group = fact.attrs["group"]
            children = index.graph_store.neighbors(fact.id, [EdgeKind.CHILD], "out")
            assert [c.id for c in children] == [
                c.id for c in chunks if c.attrs["group"] == group
            ]
            # the fact's sentence is told in (or runs into) its group's chunks
            group_text = squash(" ".join(c.text for c in children))
            assert squash(fact.text)[:12] in group_text or squash(fact.text)[-12:] in group_text


def test_two_llm_calls_per_group_of_chunks(hash_embed, two_docs):
    llm = chrono_llm()
    index = build(hash_embed, two_docs, llm=llm)
    groups = sum(math.ceil(len(layer0(index, d)) / 2) for d in ("harbour", "mountain"))
    assert llm.calls_by_kind["chrono_summary"] == groups
    assert llm.calls_by_kind["chrono_relations"] == groups


async def test_failed_group_keeps_its_chunks_and_other_groups_their_facts(hash_embed):
    llm = chrono_llm(fail_marker="chestnut")
    builder = ChronoLayerBuilder(LLMRunner(llm, max_retries=0, backoff=0.0),
                                 chunk_tokens=20, group_size=2)
    graph = NetworkXGraphStore()
    nodes, edges, failures = await builder.abuild(Document(text=HARBOUR, id_="h"), 0, [], graph)
    chunks = [n for n in nodes if n.kind is NodeKind.CHUNK]
    facts = [n for n in nodes if n.kind is NodeKind.FACT]
    failed = {c.attrs["group"] for c in chunks if "chrono_error" in c.attrs}
    assert failed == {chunks[-1].attrs["group"]}
    assert facts and failed.isdisjoint(f.attrs["group"] for f in facts)
    assert squash(" ".join(c.text for c in chunks)) == squash(HARBOUR)
    first_failed = next(c for c in chunks if "chrono_error" in c.attrs)
    assert [f["chunk_id"] for f in failures] == [first_failed.id]
    assert "chrono layer 1" in failures[0]["reason"]


@pytest.mark.parametrize("trouble", ["hang", "nested"])
async def test_a_group_whose_llm_hangs_or_nests_too_deep_fails_alone(hash_embed, trouble):
    """A hung call (timed out by the runner) or a 5,000-deep answer (refused by the bounded
    parser, after the repair round) costs that group its facts and nothing else."""
    llm = chrono_llm(hang_marker="chestnut" if trouble == "hang" else None)
    if trouble == "nested":
        relations = llm.handlers["chrono_relations"]
        llm.handlers["chrono_relations"] = (
            lambda prompt: "[" * 5_000 if "chestnut" in prompt else relations(prompt)
        )
    runner = LLMRunner(llm, max_retries=0, backoff=0.0, timeout=0.2)
    builder = ChronoLayerBuilder(runner, chunk_tokens=20, group_size=2)
    graph = NetworkXGraphStore()
    nodes, _, failures = await builder.abuild(Document(text=HARBOUR, id_="h"), 0, [], graph)
    chunks = [n for n in nodes if n.kind is NodeKind.CHUNK]
    facts = [n for n in nodes if n.kind is NodeKind.FACT]
    failed = {c.attrs["group"] for c in chunks if "chrono_error" in c.attrs}
    assert failed == {chunks[-1].attrs["group"]}
    assert facts and failed.isdisjoint(f.attrs["group"] for f in facts)
    assert len(failures) == 1
    if trouble == "hang":
        assert "LLMTimeoutError" in failures[0]["reason"]
        assert "timed out after 0.2 s" in failures[0]["reason"]
        assert runner.stats.timeouts == 1 and llm.hung_calls == 1
    else:
        assert "LLMOutputError" in failures[0]["reason"]
        assert "more than 64 levels deep" in failures[0]["reason"]
        assert runner.stats.repairs == 1 and runner.stats.timeouts == 0


def test_failed_group_reaches_the_extraction_report(hash_embed, two_docs):
    index = build(hash_embed, two_docs, llm=chrono_llm(fail_marker="chestnut"))
    report = [r for r in index.extraction_report() if "chrono layer 1" in r["reason"]]
    failed = [c for c in layer0(index, "harbour") if "chrono_error" in c.attrs]
    assert failed and [(r["doc_id"], r["chunk_id"]) for r in report] == [("harbour", failed[0].id)]
    index.delete_ref_doc("harbour")
    assert not [r for r in index.extraction_report() if "chrono layer 1" in r["reason"]]


def test_chrono_builder_is_restored_on_load_and_keeps_building(hash_embed, two_docs, tmp_path):
    """A store built with the layers keeps them for documents inserted after loading."""
    index = build(hash_embed, two_docs[:1], chunk_tokens=15, group_size=3)
    index.storage_context.persist(str(tmp_path))
    loaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)),
        llm=chrono_llm(),
        embed_model=hash_embed,
    )
    (builder,) = loaded.doc_builders
    assert isinstance(builder, ChronoLayerBuilder)
    assert (builder.chunk_tokens, builder.group_size, builder.facts) == (15, 3, "auto")
    loaded.insert(two_docs[1])
    assert layer0(loaded, "mountain") and timeline(loaded, "mountain")
    assert loaded.as_retriever(mode="chrono").retrieve("Hugo carried Erin")


def test_prompts_are_overridable(hash_embed, two_docs):
    llm = chrono_llm()
    builder = ChronoLayerBuilder(LLMRunner(llm), chunk_tokens=20, group_size=2)
    assert set(builder.get_prompts()) == {"summary_prompt", "relations_prompt"}
    builder.update_prompts({"summary_prompt": PromptTemplate(
        "---Task: chrono_summary---\nTell it briefly, in the order of events.\n"
        "Passage:\n{text}\n\nSummary:\n")})
    E2RAGIndex.from_documents(two_docs[:1], llm=llm, embed_model=hash_embed,
                              doc_builders=[builder])
    sent = [p for p in llm.prompts if "chrono_summary" in p]
    assert sent and all("Tell it briefly" in p for p in sent)


# -- layer 1 without an LLM -------------------------------------------------------------------


def test_event_facts_reuse_events_in_story_order(hash_embed, two_docs):
    llm = chrono_llm()
    builder = ChronoLayerBuilder(facts="events", chunk_tokens=20, group_size=2)
    index = E2RAGIndex.from_documents(two_docs, llm=llm, embed_model=hash_embed,
                                      doc_builders=[builder])
    assert llm.calls_by_kind["chrono_summary"] == 0
    graph = index.graph_store
    for doc_id in ("harbour", "mountain"):
        events = graph.nodes(NodeKind.EVENT, doc_id)
        facts = timeline(index, doc_id)
        assert [f.text for f in facts] == [readable(e.text) for e in events]
        assert [f.attrs["event_id"] for f in facts] == [e.id for e in events]
        indices = [tuple(f.attrs["narrative_index"]) for f in facts]
        assert indices == sorted(indices) and len(set(indices)) == len(indices)
        chunks = layer0(index, doc_id)
        for fact, event in zip(facts, events):
            children = graph.neighbors(fact.id, [EdgeKind.CHILD], "out")
            assert children and all(c.attrs["layer"] == 0 for c in children)
            assert all(c.span[0] < event.span[1] and event.span[0] < c.span[1]
                       for c in children)
            home = next(c for c in chunks if c.span[0] <= event.pos[1] < c.span[1] + 1)
            assert fact.attrs["group"] == home.attrs["group"]
    nodes = index.as_retriever(mode="chrono", similarity_top_k=1).retrieve("silver compass")
    assert "silver compass" in nodes[0].node.text


def test_offline_default_builds_event_facts_and_retrieves(hash_embed):
    """No LLM anywhere: GroundedExtractor events become the facts, retrieval still works."""
    from pathlib import Path

    import llama_index_e2rag

    text = (Path(llama_index_e2rag.__file__).parent / "data" / "peter_rabbit.txt").read_text()
    index = E2RAGIndex.from_documents([Document(text=text, id_="peter")],
                                      embed_model=hash_embed, doc_builders=[ChronoLayerBuilder()])
    facts = timeline(index, "peter")
    assert len(facts) > 20 and {f.attrs["source"] for f in facts} == {"events"}
    assert [f.attrs["event_id"] for f in facts] == [
        e.id for e in index.graph_store.nodes(NodeKind.EVENT, "peter") if e.text.strip()
    ]
    nodes = index.as_retriever(mode="chrono", similarity_top_k=3).retrieve(
        "Peter lost one of his shoes among the cabbages")
    assert "shoes" in nodes[0].node.text
    assert sum(approx_token_count(n.node.text) for n in nodes) <= 1500 + 1e-6
    for hit in nodes:  # nested clauses of one sentence are not repeated inside a value
        lines = [normalize_text(line) for line in hit.node.text.split("\n")]
        if hit.node.metadata["layer"] == 1:
            assert not any(a != b and a in b for a in lines for b in lines)


def test_offline_facts_are_readable_sentences_sharing_their_events_vectors(hash_embed):
    """A fact says its event's statement (subject shared with a conjoined verb filled in) as a
    sentence of its own, and keeps the event's vector: no fact text is embedded."""
    text = (
        "Peter gave himself up for lost, and shed big tears. His sobs were overheard by some "
        "friendly sparrows, who flew to him in great excitement. Mr. McGregor jumped up and ran "
        "after Peter. The old mouse could not answer him."
    )
    index = E2RAGIndex.from_documents([Document(text=text, id_="p")], embed_model=hash_embed,
                                      doc_builders=[ChronoLayerBuilder()])
    graph = index.graph_store
    facts = timeline(index, "p")
    events = [graph.get_node(f.attrs["event_id"]) for f in facts]
    for fact, event in zip(facts, events):
        assert fact.text == readable(event.attrs.get("statement") or event.text)
        assert fact.text[0].isupper() and fact.text.endswith((".", "!", "?"))
    said = [normalize_text(f.text) for f in facts]
    assert {"peter shed big tears", "mr mcgregor ran after peter",
            "some friendly sparrows flew to him in great excitement"} <= set(said)
    assert "his sobs were overheard by some friendly sparrows" in said  # relative clause cut
    assert any("statement" in e.attrs for e in events)
    vectors = index.stores.vectors.get_embeddings([n.id for n in facts + events])
    for fact, event in zip(facts, events):
        assert (vectors[fact.id] == vectors[event.id]).all()


@pytest.mark.parametrize(
    ("clause", "sentence"),
    [
        ("shed big tears", "Shed big tears."),
        ("  he ran\n home ", "He ran home."),
        ("Stop thief!", "Stop thief!"),
        ("'you may go,' she said", "'You may go,' she said."),
        ('he shouted "Stop"', 'He shouted "Stop".'),
        ('"Stop!"', '"Stop!"'),
        ("he waited;", "He waited."),
    ],
)
def test_readable_makes_a_clause_a_sentence(clause, sentence):
    assert readable(clause) == sentence


async def test_fact_source_resolution(hash_embed):
    doc = Document(text=HARBOUR, id_="h")
    graph = NetworkXGraphStore()
    with pytest.raises(MissingModelError, match="facts='events'"):
        await ChronoLayerBuilder(facts="llm").abuild(doc, 0, [], graph)
    # auto without any LLM configured: the LLM-free layer (no events here, so no facts)
    nodes, edges, failures = await ChronoLayerBuilder().abuild(doc, 0, [], graph)
    assert nodes and edges == [] and failures == [] and all(n.kind is NodeKind.CHUNK for n in nodes)
    # an index's runner is adopted unless the builder was given its own
    llm, own = chrono_llm(), chrono_llm()
    adopted = ChronoLayerBuilder(chunk_tokens=20, group_size=2)
    adopted.use_llm_runner(LLMRunner(llm))
    kept = ChronoLayerBuilder(LLMRunner(own), chunk_tokens=20, group_size=2)
    kept.use_llm_runner(LLMRunner(llm))
    for builder in (adopted, kept):
        nodes, _, _ = await builder.abuild(doc, 0, [], graph)
        assert any(n.kind is NodeKind.FACT for n in nodes)
    assert llm.calls_by_kind["chrono_summary"] == own.calls_by_kind["chrono_summary"] > 0


# -- neighbourhood assembling -----------------------------------------------------------------


def top_value(index, query, **kwargs):
    kwargs.setdefault("similarity_top_k", 1)
    kwargs.setdefault("token_budget", None)
    kwargs.setdefault("children_per_fact", 0)
    nodes = index.as_retriever(mode="chrono", **kwargs).retrieve(query)
    return nodes[0].node


def test_window_sets_the_assembled_value(index):
    facts = timeline(index, "harbour")
    at = next(i for i, f in enumerate(facts) if "brass lantern" in f.text)
    for window in (0, 1, 2):
        node = top_value(index, "Bob gave Carol a brass lantern", window=window)
        expected = facts[max(at - window, 0): at + window + 1]
        assert node.node_id == facts[at].id
        assert node.metadata["fact_ids"] == [f.id for f in expected]
        assert node.text == "\n".join(f.text for f in expected)
        assert node.metadata["key"] == facts[at].text


def test_windows_never_cross_document_boundaries(index):
    last = timeline(index, "harbour")[-1]
    first = timeline(index, "mountain")[0]
    node = top_value(index, last.text, window=2)
    assert node.node_id == last.id
    assert node.metadata["fact_ids"] == [f.id for f in timeline(index, "harbour")[-3:]]
    node = top_value(index, first.text, window=2)
    assert node.node_id == first.id
    assert node.metadata["fact_ids"] == [f.id for f in timeline(index, "mountain")[:3]]
    nodes = index.as_retriever(mode="chrono", similarity_top_k=20, window=3, token_budget=None).retrieve(
        "Carol Dave Frank Gwen lantern compass")
    for hit in nodes:
        ids = hit.node.metadata.get("fact_ids", [])
        assert {index.graph_store.get_node(i).doc_id for i in ids} <= {hit.node.ref_doc_id}


def test_children_carry_links_and_positions(index):
    nodes = index.as_retriever(mode="chrono", similarity_top_k=1, children_per_fact=2, order="relevance",
                            token_budget=None).retrieve("Dave lit the great lamp")
    value, *chunks = nodes
    key = index.graph_store.get_node(value.node.node_id)
    group = {c.id for c in index.graph_store.neighbors(key.id, [EdgeKind.CHILD], "out")}
    in_story = sorted(group, key=lambda i: index.graph_store.get_node(i).pos)
    assert value.node.metadata["child_ids"] == in_story
    assert {r.node_id for r in value.node.relationships[NodeRelationship.CHILD]} == group
    assert len(chunks) == 2
    assert "lamp" in chunks[0].node.text  # the child sharing most words comes first
    for chunk in chunks:
        assert chunk.node.node_id in group
        assert chunk.node.metadata["parent_id"] == key.id
        assert chunk.node.relationships[NodeRelationship.PARENT].node_id == key.id
        assert HARBOUR[chunk.node.start_char_idx: chunk.node.end_char_idx] == chunk.node.text
        assert chunk.node.metadata["pos"][1] == chunk.node.start_char_idx
        assert chunk.node.metadata["position"] == (
            f"document 0, character {chunk.node.start_char_idx}"
        )
    assert value.node.ref_doc_id == "harbour"
    assert value.node.metadata["pos"] == list(index.graph_store.get_node(
        value.node.metadata["fact_ids"][0]).pos)
    shown = value.node.get_content(metadata_mode="llm")
    assert "position: document 0, character" in shown and "pos:" not in shown


def test_relevance_and_story_order(index):
    query = "Gwen Hugo wolves chapel Carol lantern"
    ranked = index.as_retriever(mode="chrono", similarity_top_k=4, token_budget=None,
                             order="relevance").retrieve(query)
    story = index.as_retriever(mode="chrono", similarity_top_k=4, token_budget=None,
                            order="story").retrieve(query)
    scores = [n.score for n in ranked]
    assert scores == sorted(scores, reverse=True)
    assert ranked[0].node.metadata["layer"] == 1
    for i, hit in enumerate(ranked):  # each chunk after the value passage showing its key
        if hit.node.metadata["layer"] == 0:
            values = [h.node.metadata for h in ranked[:i] if h.node.metadata["layer"] == 1]
            assert hit.node.metadata["parent_id"] in values[-1]["fact_ids"]
    assert {n.node.node_id for n in story} == {n.node.node_id for n in ranked}
    positions = [tuple(n.node.metadata["pos"]) for n in story]
    assert positions == sorted(positions)
    assert positions != [tuple(n.node.metadata["pos"]) for n in ranked]
    ids = [n.node.node_id for n in ranked]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("budget", [7, 30, 80])
def test_token_budget_is_never_exceeded(index, budget):
    full = index.as_retriever(mode="chrono", similarity_top_k=10, token_budget=None, children_per_fact=1,
                           faithful=True).retrieve("Alice Bob Carol storm lantern")
    cut = index.as_retriever(mode="chrono", similarity_top_k=10, token_budget=budget, children_per_fact=1,
                          faithful=True).retrieve("Alice Bob Carol storm lantern")
    assert sum(approx_token_count(n.node.text) for n in full) > budget
    assert sum(approx_token_count(n.node.text) for n in cut) <= budget + 1e-6
    assert [n.node.node_id for n in cut] == [n.node.node_id for n in full][: len(cut)]
    assert cut[-1].node.metadata.get("truncated") is True
    assert full[len(cut) - 1].node.text.startswith(cut[-1].node.text)
    assert all(n.node.text == f.node.text for n, f in zip(cut[:-1], full))


async def test_async_path_matches_sync(index):
    retriever = index.as_retriever(mode="chrono", similarity_top_k=3)
    sync = retriever.retrieve("Erin Frank glacier")
    asynced = await retriever.aretrieve("Erin Frank glacier")
    assert [(n.node.node_id, n.node.text) for n in asynced] == [
        (n.node.node_id, n.node.text) for n in sync
    ]


def test_bad_arguments_are_refused(index):
    for kwargs in ({"window": -1}, {"order": "random"}, {"token_budget": 0},
                   {"similarity_top_k": 0}, {"children_per_fact": -1}):
        with pytest.raises(ValueError):
            index.as_retriever(mode="chrono", **kwargs)
    with pytest.raises(ValueError):
        ChronoLayerBuilder(facts="summaries")


def test_index_without_chrono_layer_says_how_to_build_it(hash_embed, two_docs):
    plain = E2RAGIndex.from_documents(two_docs, llm=chrono_llm(), embed_model=hash_embed)
    with pytest.raises(ChronoLayerMissingError, match="ChronoLayerBuilder"):
        plain.as_retriever(mode="chrono")


# -- storage ----------------------------------------------------------------------------------


def test_persist_load_round_trip(index, hash_embed, tmp_path):
    query = "Hugo carried Erin across the glacier"
    before = index.as_retriever(mode="chrono", similarity_top_k=3).retrieve(query)
    index.storage_context.persist(str(tmp_path))
    loaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path)), embed_model=hash_embed
    )
    after = loaded.as_retriever(mode="chrono", similarity_top_k=3).retrieve(query)
    assert [(n.node.node_id, n.node.text, n.node.metadata) for n in after] == [
        (n.node.node_id, n.node.text, n.node.metadata) for n in before
    ]


def test_reinserting_a_document_rebuilds_the_same_layers(index):
    before = {d: [(f.id, f.text) for f in timeline(index, d)] for d in ("harbour", "mountain")}
    chunks = [c.id for c in layer0(index, "harbour")]
    index.insert(Document(text=HARBOUR, id_="harbour"))
    assert {d: [(f.id, f.text) for f in timeline(index, d)] for d in before} == before
    assert [c.id for c in layer0(index, "harbour")] == chunks


def test_delete_removes_both_layers_of_the_document(index):
    index.delete_ref_doc("harbour")
    graph = index.graph_store
    assert graph.nodes(doc_id="harbour") == []
    assert layer0(index, "mountain") and timeline(index, "mountain")
    nodes = index.as_retriever(mode="chrono", similarity_top_k=20,
                               token_budget=None).retrieve("Alice Bob Carol lantern")
    assert nodes and {n.node.ref_doc_id for n in nodes} == {"mountain"}
    hits = index.stores.search(NodeKind.FACT, hash_vector("Alice Bob"), 100)
    assert hits and all(graph.get_node(h.id).doc_id == "mountain" for h in hits)


@pytest.mark.parametrize("order", ["relevance", "story"])
def test_the_answer_llm_reads_passages_in_the_retrievers_order(index, order):
    query = "Gwen Hugo wolves chapel Carol lantern"
    llm = chrono_llm(default_response="An answer.")
    engine = index.as_query_engine(
        mode="chrono", llm=llm, similarity_top_k=4, token_budget=None, order=order
    )
    response = engine.query(query)
    (prompt,) = [p for p in llm.prompts if "---Context---" in p]
    retrieved = [n.node for n in response.source_nodes]
    headings = re.findall(r"\[P\d+\] document '([^']+)', position (\d+):(\d+)", prompt)
    # the prompt follows the retriever's order
    assert headings == [
        (node.metadata["doc_id"], str(node.metadata["pos"][0]), str(node.metadata["pos"][1]))
        for node in retrieved
    ]
    positions = [tuple(node.metadata["pos"]) for node in retrieved]
    if order == "relevance":
        assert "Passages ranked by relevance" in prompt and positions != sorted(positions)
    else:
        assert "Passages in story order" in prompt and positions == sorted(positions)
