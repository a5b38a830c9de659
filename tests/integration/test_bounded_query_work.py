"""The bounded per-query work of ``event_graph``, ``sentence_graph`` and the passage table's
names gives what the full derivations gave, on a real-text index (Greymoor and Peter Rabbit,
offline layers, MiniLM).

Each reference below is the derivation the ranking used before it was bounded, kept verbatim:
every entity asked for its name match and every row sorted in Python, every event sorted, the
paths read from ``nx.all_shortest_paths`` (a search of the whole component), BM25 and cosine
ranks fused row by row, every name asked whether it occurs in a few passages. Latency is not
tested here (``benchmarks/scaling.py`` measures it).
"""

from __future__ import annotations

from itertools import combinations, islice
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from llama_index.core import Document

from llama_index_e2rag.extract.event_graph.entities import name_forms
from llama_index_e2rag.index import E2RAGIndex
from llama_index_e2rag.ranking import event_graph as eg
from llama_index_e2rag.ranking import sentence_graph as sg
from llama_index_e2rag.retrievers import event_graph as event_graph_mode
from llama_index_e2rag.retrievers import sentence_graph as sentence_graph_mode
from llama_index_e2rag.retrievers.passage_cache import narrative_state

_ROOT = Path(__file__).resolve().parents[2]
TEXTS = {
    "greymoor": _ROOT / "tests" / "retrievers" / "data" / "greymoor.txt",
    "peter": _ROOT / "llama_index_e2rag" / "data" / "peter_rabbit.txt",
}
QUESTIONS = [
    "What rules did Hermione break after the troll incident?",
    "Who chased Peter through the garden?",
    "Why did Peter lose his jacket and shoes?",
    "What did the headmistress say to the students?",
    "Mr. McGregor",
    "Peter",
    "Hermione",
]


@pytest.fixture(scope="module")
def index(minilm, offline) -> E2RAGIndex:
    from llama_index_e2rag import EventGraphBuilder, SentenceGraphBuilder

    documents = [Document(text=p.read_text(encoding="utf-8"), id_=k) for k, p in TEXTS.items()]
    return E2RAGIndex.from_documents(
        documents, embed_model=minilm, llm=None,
        doc_builders=[SentenceGraphBuilder(), EventGraphBuilder()],
    )


# -- the references: the derivations as they were -------------------------------------------------
def cosines_of(matrix, vector):
    """Every row's cosine with ``vector``, each summed alone in float64 (the ranking's scores;
    a float32 product's last bits depend on the BLAS kernel and the layout)."""
    if not matrix.shape[1]:
        return np.zeros(len(matrix))
    q = np.asarray(vector, dtype=np.float64)
    q = q / (np.sqrt((q * q).sum()) or 1.0)
    return np.array([float((row.astype(np.float64) * q).sum()) for row in matrix])


def align_all(view, names, vectors, top_k):
    forms = [name_forms(e) for e in view.entities]
    candidates = []
    for q, (name, vector) in enumerate(zip(names, vectors)):
        cosines = cosines_of(view.entity_vectors, vector)
        ranked = sorted(
            (eg._TIERS.index(forms[row].match(name) or "cosine"), -float(cosines[row]), row)
            for row in range(len(view.entities))
        )
        for tier, negative, row in ranked[:top_k]:
            named = 0 if tier < eg._TIERS.index("cosine") else 1
            key = (named, q if named == 0 else 0, tier, negative, row)
            candidates.append((key, eg.Aligned(row, -negative, eg._TIERS[tier], q)))
    found = {}
    for _, aligned in sorted(candidates, key=lambda c: c[0]):
        found.setdefault(aligned.idx, aligned)
    return list(found.values())


def match_all(view, vectors, top_k):
    found = {}
    for q, vector in enumerate(vectors):
        cosines = cosines_of(view.event_vectors, vector)
        for row in sorted(range(len(view.events)), key=lambda r: (-float(cosines[r]), r))[:top_k]:
            found.setdefault(row, eg.Matched(row, float(cosines[row]), q))
    return list(found.values())


def path_by_whole_search(graph, source, target, max_path_length):
    if source == target:
        return None
    try:
        tied = list(islice(nx.all_shortest_paths(graph, source, target), eg.MAX_TIED_PATHS))
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None
    if len(tied[0]) - 1 > max_path_length:
        return None
    return min(tied, key=lambda p: (sum(graph[a][b]["cost"] for a, b in zip(p, p[1:])), p))


def rrf_by_row(scores, only_positive=False):
    out = np.zeros(len(scores), dtype=np.float64)
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    for rank, i in enumerate(order, start=1):
        if only_positive and scores[i] <= 0:
            break
        out[i] = 1.0 / (sg.RRF_K + rank)
    return out


def names_by_name(table, first, last):
    found = []
    for name, rows in table.names.items():
        i = int(np.searchsorted(rows, first))
        if i < rows.size and rows[i] <= last:
            found.append(name)
    return tuple(sorted(found))


def anchors_by_row(view, cosines, query, k):
    fused = rrf_by_row(cosines) + rrf_by_row(view.lexical.scores(query), only_positive=True)
    order = sorted(range(len(view)), key=lambda i: (-fused[i], -cosines[i], i))
    return [sg.Candidate(i, float(cosines[i])) for i in order[:k] if fused[i] > 0]


# -- the agreement ------------------------------------------------------------------------------
def test_alignment_and_event_matching_equal_the_full_sorts(index, minilm) -> None:
    view = event_graph_mode._VIEW.get(index.stores)
    assert len(view.entities) > 20 and len(view.events) > 20
    names = [e.name for e in view.entities[:40]] + ["Peter", "Hermione", "McGregor", "a troll"]
    names += [n.split()[0].lower() for n in names[:10]]  # short and lower-cased forms
    vectors = [minilm.get_query_embedding(n) for n in names]
    for top_k in (1, 2, 5, len(view.entities) + 3):
        assert eg.align_entities(view, names, vectors, top_k) == align_all(
            view, names, vectors, top_k)
        assert eg.match_events(view, vectors, top_k) == match_all(view, vectors, top_k)
    assert any(a.match != "cosine" for a in eg.align_entities(view, names, vectors, 2))


def test_paths_equal_those_of_the_whole_component_search(index) -> None:
    graph = event_graph_mode._VIEW.get(index.stores).graph
    hubs = sorted(graph, key=lambda n: (-graph.degree(n), n))[:25]
    lengths = set()
    for a, b in combinations(hubs, 2):
        for cap in (1, 2, 4):
            assert eg.shortest_path(graph, a, b, cap) == path_by_whole_search(graph, a, b, cap)
        found = eg.shortest_path(graph, a, b, 4)
        lengths.add(len(found) - 1 if found else None)
    assert {1, 2} <= lengths  # direct links and paths through a neighbour were both compared


def test_sentence_anchors_equal_the_row_by_row_fusion(index, minilm) -> None:
    view = sentence_graph_mode._VIEW.get(index.stores).view
    assert len(view) > 50
    for question in QUESTIONS:
        cosines = view.cosines(minilm.get_query_embedding(question))
        bm25 = view.lexical.scores(question)
        np.testing.assert_array_equal(sg._rrf(cosines), rrf_by_row(cosines))
        np.testing.assert_array_equal(sg._rrf(bm25, True), rrf_by_row(bm25, True))
        for k in (1, 20, len(view)):
            assert sg.anchor_candidates(view, cosines, question, k) == anchors_by_row(
                view, cosines, question, k)


def test_the_names_of_a_few_passages_equal_those_found_by_asking_every_name(index) -> None:
    table = narrative_state(index.stores).table
    assert len(table) > 10
    spans = [(row, row + width) for row in range(-1, len(table)) for width in (0, 2, 5)]
    assert all(table.names_at(a, b) == names_by_name(table, a, b) for a, b in spans)
    assert sum(bool(table.names_at(a, b)) for a, b in spans) > len(table)


@pytest.mark.parametrize("seed", range(3))
def test_paths_equal_the_whole_search_when_more_paths_tie_than_are_compared(seed: int) -> None:
    """Four layers of ten entities, most links between consecutive layers present, added in a
    shuffled order: a pair three layers apart has more tied paths than ``MAX_TIED_PATHS``, so
    which ones are compared (the order they are listed in) decides the path."""
    rng = np.random.default_rng(seed)
    layers = [[f"e{layer}-{i}" for i in range(10)] for layer in range(4)]
    links = [(a, b) for near, far in zip(layers, layers[1:]) for a in near for b in far
             if rng.random() < 0.9]
    graph = nx.Graph()
    for k in rng.permutation(len(links)):
        graph.add_edge(*links[k], cost=float(rng.integers(1, 4)), hop="co_mention")
    crowded = 0
    for a, b in combinations(sorted(graph), 2):
        assert eg.shortest_path(graph, a, b, 4) == path_by_whole_search(graph, a, b, 4)
        ties = islice(nx.all_shortest_paths(graph, a, b), eg.MAX_TIED_PATHS + 1)
        crowded += sum(1 for _ in ties) > eg.MAX_TIED_PATHS
    assert crowded > 10


@pytest.mark.parametrize("seed", range(4))
def test_paths_equal_the_whole_search_through_hubs(seed: int) -> None:
    """A sparse graph grown by preferential attachment (a few hubs, like a story's main
    characters) plus random shortcuts, links added in a shuffled order: pairs up to six hops
    apart, many through a hub, with tied paths."""
    rng = np.random.default_rng(seed)
    grown = nx.barabasi_albert_graph(300, 1, seed=seed)
    links = [*grown.edges, *(tuple(rng.choice(300, 2, replace=False)) for _ in range(40))]
    graph = nx.Graph()
    for k in rng.permutation(len(links)):
        a, b = links[k]
        if a != b:
            graph.add_edge(f"e{a}", f"e{b}", cost=float(rng.integers(1, 4)), hop="co_mention")
    nodes = sorted(graph)
    lengths, tied = set(), 0
    for _ in range(300):
        a, b = rng.choice(nodes, 2, replace=False)
        for cap in (3, 6):
            assert eg.shortest_path(graph, a, b, cap) == path_by_whole_search(graph, a, b, cap)
        lengths.add(nx.shortest_path_length(graph, a, b))
        tied += len(list(islice(nx.all_shortest_paths(graph, a, b), 2))) > 1
    assert {2, 3, 4, 5} <= lengths and tied > 10
