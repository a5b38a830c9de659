"""The grounded mode's graph layout persisted per content state: read back by the next load
instead of derived from every mention, event and edge, trusted only while it matches the graph,
the same ranking; and the node matrix's sums, the same to the bit as before.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a real folder.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.maintenance.load import load_index
from llama_index_e2rag.stores import grounded_layout, read_model_file
from llama_index_e2rag.stores.node_embeddings import basic_embeddings, graph_cache

from persisted_demo import forbid, persist_demo

QUESTIONS = (
    "Where did Peter lose his shoes?",
    "Who chased Peter round the garden?",
    "What did Mrs. Rabbit give Peter?",
)


@pytest.fixture(scope="module")
def store(minilm, tmp_path_factory) -> Path:
    """Peter Rabbit indexed offline and persisted; its grounded layout not saved yet."""
    folder = tmp_path_factory.mktemp("store")
    persist_demo(folder, minilm)
    return folder


def _ranking(index: E2RAGIndex) -> list[list[tuple[str, float]]]:
    retriever = index.as_retriever(mode="grounded", similarity_top_k=5)
    return [[(n.node.node_id, float(n.score)) for n in retriever.retrieve(q)] for q in QUESTIONS]


def _no_derive(monkeypatch: pytest.MonkeyPatch) -> None:
    forbid(monkeypatch, grounded_layout, "derive", "the grounded layout was derived from the graph")


def _file(store: Path) -> Path:
    return store / "e2rag" / read_model_file.READ_MODELS_DIR / grounded_layout.GROUNDED_FILE


def _same_layout(a: grounded_layout.GroundedLayout, b: grounded_layout.GroundedLayout) -> bool:
    left, right = asdict(a), asdict(b)
    return left.keys() == right.keys() and all(
        np.array_equal(left[k], right[k]) if isinstance(left[k], np.ndarray)
        else left[k] == right[k]
        for k in left
    )


def test_the_first_retrieval_saves_the_layout_and_the_next_load_reads_it(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Path(shutil.copytree(store, store.parent / "first"))
    built = load_index(store, embed_model=minilm)
    assert not _file(store).exists()
    expected = _ranking(built)
    assert _file(store).is_file()
    derived = grounded_layout.derive(built.graph_store)

    _no_derive(monkeypatch)
    loaded = load_index(store, embed_model=minilm)
    assert _ranking(loaded) == expected  # ids and scores, to the bit
    cache = graph_cache(loaded.stores)
    assert _same_layout(
        grounded_layout.decode(grounded_layout.encode(derived)), derived
    ) and cache.node_ids == derived.node_ids and cache.text_ids == derived.text_ids
    assert np.array_equal(cache.units, derived.units)


def test_a_damaged_or_foreign_layout_is_derived_again_and_saved(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    expected = _ranking(load_index(store, embed_model=minilm))
    path = _file(store)
    text = path.read_text(encoding="utf-8")
    head, body = text.split("\n", 1)
    path.write_text(head + "\n" + body.replace('"indptr":[0,', '"indptr":[1,', 1), "utf-8")
    assert _ranking(load_index(store, embed_model=minilm)) == expected
    assert path.read_text(encoding="utf-8") == text  # derived from the graph, saved again

    index = load_index(store, embed_model=minilm)
    key = read_model_file.content_key(index.stores, index.stores.version, grounded_layout.FORMAT)
    read_model_file.write(index.stores, grounded_layout.GROUNDED_FILE, key, {"other": 1})
    assert _ranking(load_index(store, embed_model=minilm)) == expected
    _no_derive(monkeypatch)
    assert _ranking(load_index(store, embed_model=minilm)) == expected


def test_a_write_makes_the_saved_layout_stale(store: Path, minilm, tmp_path: Path) -> None:
    store = Path(shutil.copytree(store, tmp_path / "store"))
    index = load_index(store, embed_model=minilm)
    before = graph_cache(index.stores).node_ids
    index.insert(Document(text="Benjamin Bunny buried a silver spoon.", id_="benjamin"))
    after = graph_cache(index.stores).node_ids
    assert len(after) > len(before)
    reloaded = load_index(store, embed_model=minilm)
    assert graph_cache(reloaded.stores).node_ids == after
    found = reloaded.as_retriever(mode="grounded").retrieve("Who buried the spoon?")
    assert found[0].node.get_content() == "Benjamin Bunny buried a silver spoon."


def test_the_node_matrix_sums_groundings_as_one_scatter_add_does() -> None:
    """The grounded-text sums are those of ``np.add.at`` over every grounding in CSR order, to
    the bit: the persisted layout must rank exactly as the graph-built cache did."""
    rng = np.random.default_rng(7)
    texts = rng.normal(size=(50, 16)).astype(np.float32)
    counts = rng.choice([0, 1, 1, 1, 2, 3, 9], size=40)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.concatenate(
        [np.sort(rng.choice(50, size=c, replace=False)) for c in counts]
    ).astype(np.int64)
    names = rng.normal(size=(40, 16)).astype(np.float32)

    def unit(matrix: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
        return matrix / np.where(norms > 0.0, norms, 1.0)

    sums = np.zeros_like(names)
    np.add.at(sums, np.repeat(np.arange(40), counts), texts[indices])
    mixed = np.where((counts > 0)[:, None], 0.3 * unit(names) + 0.7 * unit(sums), unit(names))
    expected = unit(mixed)

    assert np.array_equal(basic_embeddings(names, indptr, indices, texts, 0.3), expected)


def _derive_as_first_written(graph) -> grounded_layout.GroundedLayout:
    """``derive`` as first written: every candidate, text and edge read whole, as records."""
    from llama_index_e2rag.schema import EdgeKind, NodeKind, normalize_text

    nodes = [n for kind in grounded_layout.CANDIDATE_KINDS for n in graph.nodes(kind=kind)]
    position = {n.id: i for i, n in enumerate(nodes)}
    grounded: list[list[str]] = [[] for _ in nodes]
    for edge in graph.edges(kind=EdgeKind.GROUNDED_IN):
        if edge.source in position:
            grounded[position[edge.source]].append(edge.target)
    for row, node in enumerate(nodes):
        if not grounded[row] and node.chunk_id and graph.has_node(node.chunk_id):
            grounded[row].append(node.chunk_id)
    found = {n.id: n for n in graph.get_nodes({t for ts in grounded for t in ts})}
    text_ids = sorted(found, key=lambda i: (found[i].pos, i))
    text_row = {t: i for i, t in enumerate(text_ids)}
    indices = [sorted({text_row[t] for t in ts if t in text_row}) for ts in grounded]
    pairs = set()
    for kind in grounded_layout.NEIGHBOR_EDGE_KINDS:
        for edge in graph.edges(kind=kind):
            a, b = position.get(edge.source), position.get(edge.target)
            if a is not None and b is not None and a != b:
                pairs |= {(a, b), (b, a)}
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)

    for edge in graph.edges(kind=EdgeKind.NEXT):
        a, b = position.get(edge.source), position.get(edge.target)
        if a is not None and b is not None and {nodes[a].kind, nodes[b].kind} == {NodeKind.MENTION}:
            join(a, b)
    first: dict = {}
    for i, node in enumerate(nodes):
        if node.kind == NodeKind.EVENT and node.span:
            join(first.setdefault((node.doc_id, tuple(node.span), normalize_text(node.text)), i), i)
    roots = [find(i) for i in range(len(nodes))]
    numbering = {root: n for n, root in enumerate(dict.fromkeys(roots))}
    texts = [found[t] for t in text_ids]
    ordered = sorted(pairs)
    return grounded_layout.GroundedLayout(
        node_ids=[n.id for n in nodes],
        indptr=np.cumsum([0] + [len(r) for r in indices]),
        indices=np.array([r for rows in indices for r in rows], dtype=np.int64),
        text_ids=text_ids,
        sources=np.array([p[0] for p in ordered], dtype=np.int64),
        targets=np.array([p[1] for p in ordered], dtype=np.int64),
        units=np.array([numbering[r] for r in roots], dtype=np.int64),
        text_groups=grounded_layout.text_groups(texts),
        text_lengths=np.array(
            [n.span[1] - n.span[0] if n.span else len(n.text) for n in texts], dtype=np.int64
        ),
    )


class _SmallPages:
    """A graph whose scans come in pages of 5 records: many pages, a ragged last one."""

    def __init__(self, graph) -> None:
        self.graph = graph

    def __getattr__(self, name: str):
        return getattr(self.graph, name)

    def scan_nodes(self, kind=None, doc_id=None, page: int = 5):
        return self.graph.scan_nodes(kind, doc_id, 5)

    def scan_edges(self, kind=None, doc_id=None, page: int = 5):
        return self.graph.scan_edges(kind, doc_id, 5)


def test_the_layout_read_a_page_at_a_time_is_the_one_read_whole(
    store: Path, minilm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``derive`` keeps only ids, rows and spans of a page at a time (a million-word story's
    records were the peak of a build); on the SQLite graph in pages of five, and on an
    in-memory copy with LLM-style nodes grounded in their chunk (or in a chunk that is gone)
    and an event told twice at one span, it gives the layout of reading everything whole."""
    from llama_index_e2rag.graph import NetworkXGraphStore
    from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind

    graph = load_index(store, embed_model=minilm).graph_store
    monkeypatch.setattr(grounded_layout, "_TEXT_PAGE", 3)
    expected = _derive_as_first_written(graph)
    assert _same_layout(grounded_layout.derive(_SmallPages(graph)), expected)
    assert len(expected.sources) and len(set(expected.units)) < len(expected.node_ids)

    copy = NetworkXGraphStore()
    copy.upsert_nodes(graph.nodes())
    copy.upsert_edges(graph.edges())
    event = next(n for n in graph.nodes(kind=NodeKind.EVENT) if n.span and n.chunk_id)
    chunk_id = event.chunk_id
    extra = [
        event.model_copy(update={"id": "told-again", "pos": (*event.pos[:-1], 10**6)}),
        GraphNode(id="llm-event", kind=NodeKind.EVENT, text="Peter ran", doc_id=event.doc_id,
                  pos=event.pos, chunk_id=chunk_id),
        GraphNode(id="llm-mention", kind=NodeKind.MENTION, text="Peter", doc_id=event.doc_id,
                  pos=event.pos, chunk_id="chunk-that-is-gone"),
    ]
    copy.upsert_nodes(extra)
    copy.upsert_edges([
        e.model_copy(update={"source": "told-again"})
        for e in graph.edges_of(event.id, [EdgeKind.GROUNDED_IN], direction="out")
    ])
    expected = _derive_as_first_written(copy)
    derived = grounded_layout.derive(copy)
    assert _same_layout(derived, expected)
    rows = {node_id: k for k, node_id in enumerate(derived.node_ids)}
    assert derived.units[rows["told-again"]] == derived.units[rows[event.id]]
    assert chunk_id in derived.text_ids
    gone = rows["llm-mention"]
    assert derived.indptr[gone] == derived.indptr[gone + 1]
