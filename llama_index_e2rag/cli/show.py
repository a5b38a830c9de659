"""``e2rag show``: what a store holds, with the layers' own nodes counted apart."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from pathlib import Path

from llama_index_e2rag.app.query import query_advice
from llama_index_e2rag.cli.store import has_store, load_store
from llama_index_e2rag.errors import E2RAGError, StoreDamagedError
from llama_index_e2rag.modes import DEFAULT_MODE, RETRIEVER_MODES
from llama_index_e2rag.persist.check import full_check, light_check
from llama_index_e2rag.persist.info import StoreSummary, sentence_roles, summarize
from llama_index_e2rag.schema import NodeKind

if TYPE_CHECKING:
    from llama_index_e2rag.graph.base import GraphStore
    from llama_index_e2rag.index import E2RAGIndex

#: How ``show`` and ``index`` name ChronoRAG's layer-0 chunks (kind ``chunk``, not extraction).
CHRONO_CHUNK_LABEL = "chunk (chrono layer 0)"
#: How ``show`` and ``index`` name SentGraph's sentences (kind ``sentence``, like the grounded
#: extraction's), by role: core or supplementary.
SENTGRAPH_LABEL = "sentence (sentence graph {role})"


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    show = commands.add_parser("show", help="what a store holds")
    show.add_argument("--store", required=True, type=Path)
    show.add_argument(
        "--html",
        type=Path,
        default=None,
        help="write a self-contained HTML page of the story here instead (open it in a browser)",
    )
    show.add_argument(
        "--query", default=None, help="with --html: this query's evidence and its subgraph"
    )
    show.add_argument("--entity", default=None, help="with --html: this character's timeline")
    show.add_argument(
        "--mode",
        choices=RETRIEVER_MODES,
        default=None,
        help=f"with --query: the retrieval mode (default {DEFAULT_MODE})",
    )
    show.add_argument(
        "--check",
        action="store_true",
        help="the full check: every file against its checksum, SQLite's page check and every "
        "document's rows against the digest and counts committed with them (reads the whole "
        "store; without it, show checks every file's size and the vector counts, and adds up "
        "the counts the documents' records hold)",
    )
    show.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``e2rag show``: the store's health, documents, node and edge counts, builders, LLM
    spending and extraction failures; with ``--html``, the story page instead."""
    if getattr(args, "html", None) is not None:
        return write_story_page(args)
    unused = [
        flag
        for flag, value in (("--query", "query"), ("--entity", "entity"), ("--mode", "mode"))
        if getattr(args, value, None) is not None
    ]
    if unused:
        raise E2RAGError(
            f"{', '.join(unused)} apply only with --html FILE, e.g. e2rag show --store "
            f"{args.store} --html story.html {unused[0]} ..."
        )

    check = full_check if getattr(args, "check", False) else light_check
    health = check(args.store) if (args.store / "e2rag").is_dir() else None
    if health is not None and health.problems:
        print(f"store: {args.store}")
        print("status: DAMAGED")
        for problem in health.problems:
            print(f"  {problem}")
        more = f" (and {len(health.problems) - 1} more)" if len(health.problems) > 1 else ""
        first = health.problems[0]
        fix = "" if "e2rag repair" in first else f"; run: e2rag repair --store {args.store}"
        raise StoreDamagedError(f"{first}{more}{fix}")
    labels = (CHRONO_CHUNK_LABEL, SENTGRAPH_LABEL)
    summary = summarize(args.store, *labels) if has_store(args.store) else None
    if summary is None:  # no store (load_store says so) or a 0.1.0 store: load it
        summary = _loaded_summary(load_store(args.store))
    print(f"store: {args.store}")
    notes = list(health.notes) if health is not None else []
    if summary.scanned:
        notes.append("counted from every row (documents committed before their records counted "
                     f"their rows; e2rag repair --store {args.store} records the counts once)")
    said = [f"{len(notes)} note(s)"] if notes else []
    if health is not None and check is light_check:
        said.append("file sizes and vector counts; e2rag show --check reads every byte")
    print("status: ok" + (f" ({'; '.join(said)})" if said else ""))
    for note in notes:
        print(f"  note: {note}")
    print("documents:")
    for order, doc_id, chunks in summary.documents:
        print(f"  [{order}] {doc_id} ({chunks} chunks)")
    print("nodes: " + (", ".join(f"{k}={v}" for k, v in summary.nodes.items()) or "none"))
    print("edges: " + (", ".join(f"{k}={v}" for k, v in summary.edges.items()) or "none"))
    if summary.doc_builders:
        print(f"document builders: {', '.join(summary.doc_builders)}")
    stats = summary.llm_stats
    if stats:
        print(
            f"llm: {stats.get('calls', 0)} calls, {stats.get('cache_hits', 0)} cache hits, "
            f"{stats.get('failures', 0)} failures"
        )
    print(f"extraction failures: {len(summary.failures)}")
    for failure in summary.failures:
        print(f"  {failure['doc_id']} {failure['chunk_id']}: {failure['reason']}")
    return 0


def write_story_page(args: argparse.Namespace) -> int:
    """``e2rag show --html FILE``: the story page (``E2RAGIndex.visualize``), written whole;
    checked before the store is loaded so a typo costs no load."""
    if args.query is not None and not args.query.strip():
        raise E2RAGError("--query is empty; ask something, e.g. --query \"Who is X?\"")
    if args.mode is not None and args.query is None:
        raise E2RAGError("--mode chooses how --query retrieves; add --query \"...\"")
    if args.entity is not None and not args.entity.strip():
        raise E2RAGError("--entity is empty; name a character, e.g. --entity Peter")
    # deferred: the story page's modules (extraction, timelines) serve only --html
    from llama_index_e2rag.visualize import write_page

    target = args.html
    if target.is_dir() or not target.parent.is_dir():
        write_page(target, "")  # raises the one-line reason, writes nothing
    index = load_store(args.store)
    mode = args.mode or DEFAULT_MODE
    try:
        page = index.visualize(args.query, entity=args.entity, mode=mode)
    except E2RAGError as exc:
        raise E2RAGError(query_advice(exc, mode, None, args.store)) from exc
    write_page(target, page)
    print(f"wrote {target} ({len(page.encode('utf-8')) // 1024 + 1} KB); open it in a browser")
    return 0


def _loaded_summary(index: "E2RAGIndex") -> "StoreSummary":
    orders = index.graph_store.doc_orders()
    documents = sorted(
        (orders[doc_id], doc_id, len(info.node_ids)) for doc_id, info in index.ref_doc_info.items()
    )
    return StoreSummary(
        documents=documents,
        nodes=node_counts(index.graph_store),
        edges=index.graph_store.counts()["edges"],
        failures=index.extraction_report(),
        doc_builders=[type(b).__name__ for b in index.doc_builders],
        llm_stats=index.llm_stats(),
    )


def node_counts(graph: "GraphStore") -> dict[str, int]:
    """Nodes per kind, ChronoRAG's layer-0 chunks and SentGraph's sentences counted apart from
    the extraction's."""
    counts = dict(graph.counts()["nodes"])
    layer0 = sum(1 for c in graph.nodes(NodeKind.CHUNK) if c.attrs.get("layer") == 0)
    if layer0:
        counts[NodeKind.CHUNK.value] = counts.get(NodeKind.CHUNK.value, 0) - layer0
        counts[CHRONO_CHUNK_LABEL] = layer0
    return sentence_graph_counts(counts, graph)


def sentence_graph_counts(counts: dict[str, int], graph: "GraphStore") -> dict[str, int]:
    """``counts`` with SentGraph's sentences (only a graph with topics has them) moved from
    ``sentence`` to a ``SENTGRAPH_LABEL`` per role."""
    if not counts.get(NodeKind.TOPIC.value):
        return counts
    roles: dict[str, int] = {}
    for node in graph.nodes(NodeKind.SENTENCE):
        role = node.attrs.get("sentgraph")
        if role:
            roles[role] = roles.get(role, 0) + 1
    return sentence_roles(counts, roles, SENTGRAPH_LABEL)
