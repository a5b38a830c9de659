"""The ``DocumentBuilder`` protocol: document-level graph builders run by the index.

Chunk extractors see one chunk at a time; some methods (ChronoRAG's fact layer, SentGraph's topic
bridges) need the whole document. They implement this protocol and the index runs them once per
document, after chunk extraction, then upserts and embeds what they return like any other node.

Three optional extensions, all duck-typed so a plain ``abuild`` stays enough:

* **Failures.** ``abuild`` may return ``(nodes, edges, failures)``; each failure is a
  ``{"chunk_id": ..., "reason": ...}`` dict for a part of the document the builder could not
  process (e.g. a ChronoRAG group whose LLM call failed). The index adds ``doc_id`` and lists them
  in ``index.extraction_report()`` next to the chunk extractors' failures.
* **Persistence.** A builder with a class attribute ``config_name`` listed in
  ``RESTORABLE_BUILDERS``, a ``to_config() -> dict`` (JSON values) and a classmethod
  ``from_config(params)`` is recorded in the index struct and rebuilt when the index is loaded,
  so documents inserted later get the same layers without passing ``doc_builders`` again.
* **Links between documents.** ``abuild`` sees one document, so edges to *other* documents (e.g.
  SentGraph's topic bridges) come from ``async def alink(staged, committed) -> (links_by_doc,
  failures)``. ``staged`` is the batch as ``[(doc_id, staging graph), ...]`` in batch order and
  ``committed`` the index's graph as committed, which still holds the old version of a batch
  document being replaced: skip those. ``links_by_doc`` maps a batch document to the edges it
  owns (``doc_id`` = that document, one end among its nodes, the other in another batch document
  or a committed document outside the batch); a failure is a ``{"chunk_id", "reason"}`` dict
  that may also name its batch document (``"doc_id"``), else it goes to the document holding
  the chunk, else to the batch's last document. The index calls ``alink`` under its write lock,
  just before the commit (``ingest.link_staged``), so concurrent inserts see each other; the
  links are written after every document of the batch, and when the document at a link's
  other end is deleted or replaced the link goes and its owner's digest is re-sealed.
"""

from __future__ import annotations

import importlib
from typing import (
    Any,
    Iterable,
    Optional,
    Protocol,
    Sequence,
    Union,
    runtime_checkable,
)

from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.errors import MissingModelError
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.llm.runner import LLMRunner, resolve_llm
from llama_index_e2rag.schema import GraphEdge, GraphNode


#: ``{"chunk_id": ..., "reason": ...}``: a part of a document a builder could not process.
BuildFailure = dict[str, str]
BuildResult = Union[
    tuple[Iterable[GraphNode], Iterable[GraphEdge]],
    tuple[Iterable[GraphNode], Iterable[GraphEdge], Iterable[BuildFailure]],
]

#: Builders an index can rebuild from its stored config: ``config_name -> "module:Class"``.
RESTORABLE_BUILDERS = {
    "chrono": "llama_index_e2rag.extract.chrono:ChronoLayerBuilder",
    "sentence_graph": "llama_index_e2rag.extract.sentence_graph.builder:SentenceGraphBuilder",
    "event_graph": "llama_index_e2rag.extract.event_graph.builder:EventGraphBuilder",
}


@runtime_checkable
class DocumentBuilder(Protocol):
    """Adds document-level nodes and edges.

    ``abuild`` receives the source document, its document order (the first element of every
    ``pos`` it creates), the document's chunk TextNodes in story order (their ids are the ``chunk``
    graph node ids) and a graph holding this document's chunk and extracted nodes. It returns new
    nodes and edges (and optionally failures, see the module doc); edges may point at any node of
    that graph or at the returned nodes. Nodes and edges may be any iterables, generators
    included: the index reads them a page at a time after ``abuild`` returns, so a builder of a
    long document need not hold all it makes at once (it must then not read ``graph`` while
    yielding). Builders must not write to the graph themselves: the
    index commits everything of a document at once, so a failing build leaves nothing
    half-written. A builder that calls an LLM may also define ``use_llm_runner(runner)``: the
    index then hands it its own runner (cache, retries, accounting); one that compares texts
    while building (E²GraphRAG's entity fusion) may define ``use_embed_model(model)`` to get
    the index's embedding model.
    """

    async def abuild(
        self,
        document: Document,
        doc_order: int,
        chunks: Sequence[TextNode],
        graph: GraphStore,
    ) -> BuildResult: ...


class OptionalLLM:
    """For builders whose LLM is optional (a setting "auto" | "llm" | an LLM-free choice): the
    index's runner is adopted unless one was given, else an LLM is resolved once, on first need
    (``Settings.llm``, ``OPENAI_API_KEY``), so an LLM passed only to the index is still seen."""

    llm_runner: Optional["LLMRunner"]

    def _keep_runner(self, runner: Optional["LLMRunner"]) -> None:
        self.llm_runner = runner
        self._explicit_runner = self._runner_resolved = runner is not None

    def use_llm_runner(self, runner: Optional["LLMRunner"]) -> None:
        """Adopt the index's runner (cache, stats, retries) unless one was given explicitly."""
        if not self._explicit_runner:
            self.llm_runner = runner
            self._runner_resolved = True

    def _runner_for(self, setting: str, option: str, offline: str) -> Optional["LLMRunner"]:
        """The runner for ``option`` set to ``setting``; None for its LLM-free path
        (``offline``, which the error names when ``"llm"`` finds no model)."""
        if setting not in ("auto", "llm"):
            return None
        if not self._runner_resolved:
            llm = resolve_llm()
            self.llm_runner = LLMRunner(llm) if llm is not None else None
            self._runner_resolved = True
        if self.llm_runner is None and setting == "llm":
            raise MissingModelError(
                f"{type(self).__name__}({option}='llm') needs an LLM: pass llm= to the index or "
                "llm_runner=LLMRunner(llm), set Settings.llm or OPENAI_API_KEY, or use "
                f"{option}='{offline}' for the LLM-free path"
            )
        return self.llm_runner


def split_result(
    result: BuildResult,
) -> tuple[Iterable[GraphNode], Iterable[GraphEdge], list[BuildFailure]]:
    """``(nodes, edges, failures)`` from either form of ``abuild``'s return value (nodes and
    edges as returned: they may be read only once)."""
    nodes, edges, *rest = result
    return nodes, edges, list(rest[0]) if rest else []


def builder_configs(builders: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``{config_name: params}`` of the builders that can be restored on load."""
    configs = {}
    for builder in builders:
        name = getattr(builder, "config_name", None)
        if name in RESTORABLE_BUILDERS and hasattr(builder, "to_config"):
            configs[name] = builder.to_config()
    return configs


def restore_builders(configs: dict[str, dict[str, Any]]) -> list[DocumentBuilder]:
    """The builders recorded by ``builder_configs`` (unknown names are refused, not guessed)."""
    builders = []
    for name, params in configs.items():
        if name not in RESTORABLE_BUILDERS:
            raise ValueError(
                f"the index was built with an unknown document builder {name!r}; pass "
                "doc_builders=[...] when loading it"
            )
        module_name, class_name = RESTORABLE_BUILDERS[name].split(":")
        builder_cls = getattr(importlib.import_module(module_name), class_name)
        builders.append(builder_cls.from_config(params))
    return builders
