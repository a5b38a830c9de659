"""Every metadata key the package writes, in one place: one name per meaning, one list per meaning.

The strings are what stores and users see (in chunk metadata, on returned nodes, in a
``Response``) and never change; the Python names say what each one means. Three groups:

- ingest-internal keys (``INTERNAL_METADATA_KEYS``): the graph fragment an extractor writes on a
  chunk; the index pops them, and results never carry them;
- keys on returned nodes: positions, evidence, signals, anchors, budget flags, and which of the
  package's own keys the answer LLM reads (``LLM_VISIBLE_KEYS``; every other key a retriever adds
  is bookkeeping, ``bookkeeping_keys``);
- keys naming a source: ``RESULT_SOURCE_KEYS`` (copied onto every result) and
  ``SOURCE_NAME_KEYS`` (where a text came from, in order of preference).

No imports: extractors, retrievers, engines and ``lightrag_ext`` all read it.
"""

from __future__ import annotations

from typing import Iterable

# -- ingest-internal (written by extractors on chunks, popped by the index) -----------------------
#: The graph nodes an extractor found in a chunk (JSON dicts of ``GraphNode``).
GRAPH_NODES_KEY = "e2rag_graph_nodes"
#: The graph edges an extractor found in a chunk (JSON dicts of ``GraphEdge``).
GRAPH_EDGES_KEY = "e2rag_graph_edges"
#: Why a chunk's extraction failed (the chunk stays indexed as text).
EXTRACTION_ERROR_KEY = "e2rag_extraction_error"
#: The document's place among the index's documents.
DOC_ORDER_KEY = "e2rag_doc_order"
#: Keys that must never reach an embedding model or an LLM prompt, nor a result.
INTERNAL_METADATA_KEYS = (GRAPH_NODES_KEY, GRAPH_EDGES_KEY, EXTRACTION_ERROR_KEY, DOC_ORDER_KEY)

# -- on returned nodes ----------------------------------------------------------------------------
#: A node's narrative position ``[doc_order, char_offset, ordinal]`` (hidden from the LLM).
POS_KEY = "pos"
#: The same position as text the LLM reads ("document 0, character 1234").
POSITION_KEY = "position"
#: The graph node ids that led a retriever to a result (the query engine rebuilds the subgraph).
EVIDENCE_KEY = "graph_nodes"
#: The LLM-visible evidence text of a passage (``context.evidence.render_evidence``).
EVIDENCE_TEXT_KEY = "evidence"
#: What brought a result: ``{signal: contribution to its score}`` (hidden).
SIGNALS_KEY = "signals"
#: An *after / before / during* question's anchor: the anchor passage, its confidence, whether it
#: was used, the region (``ranking.anchor``; hidden).
ANCHOR_KEY = "anchor"
#: Key of ``metadata["signals"]`` holding the mode's own score before calibration.
RAW_SCORE_KEY = "raw_score"
#: Flag on a node whose text the word budget shortened (repeats dropped or cut at the end).
TRIMMED_KEY = "budget_trimmed"
#: The passage a narrative continuation follows (or, for *before*, precedes).
CONTINUES_KEY = "continues"
#: Key of ``metadata["signals"]``: the question's best cosine with any passage (calibrates the
#: narrative score, see ``ranking.scores``).
STORY_MATCH_KEY = "story_match"
#: Key of ``metadata["signals"]``: the result's 1-based place in the narrative ranking,
#: continuations included (the 6th passage is less likely the answer than the 1st).
RANK_KEY = "rank"
#: Key of ``metadata["signals"]``: a continuation's parent's raw score (its score is the hit's).
CONTINUATION_KEY = "continuation"
#: An event-graph item's 0-based place in the evidence order (hidden).
EVIDENCE_RANK_KEY = "rank"
#: ``Response.metadata`` key of the extractive answer's evidence sentences, as plain dicts.
RESPONSE_EVIDENCE_KEY = "e2rag_evidence"

#: The package's own result keys the answer LLM reads: the position, the evidence text, and the
#: labels, roles, relation paths and topics of the graph modes' items. Every other key a
#: retriever adds describes retrieval and is hidden (``bookkeeping_keys``).
LLM_VISIBLE_KEYS = (
    POSITION_KEY, EVIDENCE_TEXT_KEY, "label", "evidence_role", "relation_path", "topic"
)


def bookkeeping_keys(ours: Iterable[str]) -> list[str]:
    """The keys among ``ours`` (what a retriever added to a node) hidden from the LLM: all but
    ``LLM_VISIBLE_KEYS``. A user's own metadata is never in ``ours`` and stays as it was."""
    return [key for key in dict.fromkeys(ours) if key not in LLM_VISIBLE_KEYS]


# -- naming a source ------------------------------------------------------------------------------
#: Keys copied from a document onto every result, in the order a reader recognises a source.
RESULT_SOURCE_KEYS = ("file_name", "title")
#: Keys (in order of preference) naming where a node's text came from.
SOURCE_NAME_KEYS = ("file_name", "file_path", "title", "source", "url")
