"""``e2rag`` command line: index files, query a store, show what is in it, run the demo.

Models are resolved as everywhere else (``Settings`` > ``OPENAI_API_KEY`` > offline default), so
with nothing configured the CLI builds LLM-free grounded graphs with MiniLM embeddings and answers
extractively. Bad input ends with a one-line reason on stderr and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional, Sequence

from llama_index_e2rag.context import POS_KEY, format_position
from llama_index_e2rag.errors import BadDocumentError, E2RAGError
from llama_index_e2rag.modes import DEFAULT_MODE, HYDE_VARIANTS, RETRIEVER_MODES
from llama_index_e2rag.schema import NodeKind

if TYPE_CHECKING:
    from llama_index.core import Document

    from llama_index_e2rag.graph.base import GraphStore
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.store_info import StoreSummary

#: File types picked up when a folder is given to ``e2rag index``.
TEXT_SUFFIXES = (".txt", ".md", ".text", ".markdown")
#: How ``show`` and ``index`` name ChronoRAG's layer-0 chunks (kind ``chunk``, not extraction).
CHRONO_CHUNK_LABEL = "chunk (chrono layer 0)"


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (``e2rag: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"e2rag: error: {message} (see e2rag --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="e2rag", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    index = commands.add_parser("index", help="index text files or folders into a store")
    index.add_argument("paths", nargs="+", type=Path, help="text files or folders of them")
    index.add_argument("--store", required=True, type=Path, help="store folder (created)")
    index.add_argument("--chunk-size", type=int, default=None, help="tokens per chunk")
    index.add_argument("--chunk-overlap", type=int, default=None, help="tokens of overlap")
    index.add_argument("--combined", action="store_true", help="one LLM call per chunk")
    index.add_argument(
        "--chrono",
        action="store_true",
        help="also build ChronoRAG's layers (mode chrono); a store remembers it for later runs",
    )
    index.add_argument("--quiet", action="store_true", help="no progress bars")
    index.set_defaults(func=_cmd_index)

    query = commands.add_parser("query", help="answer a question from a store")
    query.add_argument("question")
    query.add_argument("--store", required=True, type=Path)
    query.add_argument(
        "--mode",
        choices=RETRIEVER_MODES,
        default=None,
        help=f"retrieval mode (default {DEFAULT_MODE}; entity_event with --hyde)",
    )
    query.add_argument(
        "--hyde", choices=HYDE_VARIANTS, default=None, help="entity_event only (implies it)"
    )
    query.add_argument(
        "--top-k", type=int, default=None, help="results retrieved (default: the mode's own)"
    )
    query.add_argument(
        "--budget-words", type=int, default=None, help="fill this many words of evidence instead"
    )
    query.add_argument(
        "--explain", action="store_true", help="print which signals brought each result"
    )
    query.add_argument("--quiet", action="store_true", help="no progress bars")
    query.set_defaults(func=_cmd_query)

    show = commands.add_parser("show", help="what a store holds")
    show.add_argument("--store", required=True, type=Path)
    show.set_defaults(func=_cmd_show)

    migrate = commands.add_parser(
        "migrate", help="convert a store written by llama-index-e2rag 0.1.0 to today's layout"
    )
    migrate.add_argument("--store", required=True, type=Path)
    migrate.set_defaults(func=_cmd_migrate)

    demo = commands.add_parser("demo", help="index the bundled sample story and ask it")
    demo.add_argument("--store", type=Path, default=None, help="keep the demo store here")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``e2rag`` script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (E2RAGError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"e2rag: error: {reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("e2rag: interrupted", file=sys.stderr)
        return 130


# -- commands ------------------------------------------------------------------------------------
def _cmd_index(args: argparse.Namespace) -> int:
    from llama_index_e2rag.index import E2RAGIndex

    documents = read_documents(args.paths)
    options = {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "combined": args.combined or None,
        "show_progress": not args.quiet,
        "cache_dir": str(args.store),
    }
    if args.chrono:
        from llama_index_e2rag.extract.chrono import ChronoLayerBuilder

        options["doc_builders"] = [ChronoLayerBuilder()]
    if _has_store(args.store):
        index = load_store(args.store, progress=not args.quiet, **options)
        index.insert_documents(documents)
    else:
        index = E2RAGIndex.from_documents(documents, **options)
    index.storage_context.persist(str(args.store))
    counts = node_counts(index.graph_store)
    failures = index.extraction_report()
    print(
        f"indexed {len(documents)} document(s) into {args.store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
        + (f"; {len(failures)} chunk(s) failed extraction (see e2rag show)" if failures else "")
    )
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise ValueError("the question is empty; ask something, e.g. e2rag query \"Who is X?\"")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError("--top-k must be at least 1")
    if args.budget_words is not None and args.budget_words < 1:
        raise ValueError("--budget-words must be at least 1")
    index = load_store(args.store, progress=not args.quiet)
    options = {"similarity_top_k": args.top_k, "budget_words": args.budget_words}
    mode = args.mode or ("entity_event" if args.hyde else DEFAULT_MODE)
    engine = index.as_query_engine(
        mode=mode, hyde=args.hyde, **{k: v for k, v in options.items() if v is not None}
    )
    response = engine.query(args.question)
    print(str(response).strip())
    print("\nEvidence:")
    for i, source in enumerate(response.source_nodes, start=1):
        meta = source.node.metadata
        pos = meta.get(POS_KEY)
        where = format_position(pos) if pos else "position unknown"
        score = f"{source.score:.3f}" if source.score is not None else "-"
        snippet = " ".join(source.node.get_content().split())[:200]
        source_id = meta.get("doc_id", source.node.ref_doc_id)
        print(f"[{i}] {source_id} ({where}; score {score}) {snippet}")
        if args.explain:
            print(f"    {explain(meta)}")
    return 0


def explain(metadata: dict) -> str:
    """One line saying what brought a result: the narrative mode's signal contributions, or
    the evidence another mode records."""
    signals = metadata.get("signals")
    if signals:
        parts = [f"{name} {value:+.3f}" for name, value in signals.items() if name != "continuation"]
        line = "signals: " + (", ".join(parts) or "none")
        if "continuation" in signals:
            line += f"; continues a hit scored {signals['continuation']:.3f}"
        return line
    seeds = metadata.get("seed_scores")
    if seeds:
        return f"seeds: {len(seeds)} mention/event seed(s) in this chunk, best {max(seeds.values()):.3f}"
    if "query_hits" in metadata:
        return (f"graph: {metadata['query_hits']} query node(s) matched, "
                f"{metadata.get('ret_count', 0)} graph node(s) grounded here")
    return "similarity only (this mode records no other signals)"


def _cmd_show(args: argparse.Namespace) -> int:
    from llama_index_e2rag.store_info import summarize

    summary = summarize(args.store, CHRONO_CHUNK_LABEL) if _has_store(args.store) else None
    if summary is None:  # no store (load_store says so) or a 0.1.0 store: load it
        summary = _loaded_summary(load_store(args.store))
    print(f"store: {args.store}")
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


def _loaded_summary(index: "E2RAGIndex") -> "StoreSummary":
    from llama_index_e2rag.store_info import StoreSummary

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


def _cmd_migrate(args: argparse.Namespace) -> int:
    from llama_index_e2rag.migrate import migrate_store

    counts = migrate_store(args.store)
    print(
        f"converted {args.store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts["nodes"].items())
        + f"; {sum(counts['vectors'].values())} vectors"
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from llama_index_e2rag.demo import run_demo

    return run_demo(store_dir=str(args.store) if args.store else None)


# -- helpers -------------------------------------------------------------------------------------
def node_counts(graph: "GraphStore") -> dict[str, int]:
    """Nodes per kind, ChronoRAG's layer-0 chunks counted apart from the extraction chunks."""
    counts = dict(graph.counts()["nodes"])
    layer0 = sum(1 for c in graph.nodes(NodeKind.CHUNK) if c.attrs.get("layer") == 0)
    if layer0:
        counts[NodeKind.CHUNK.value] = counts.get(NodeKind.CHUNK.value, 0) - layer0
        counts[CHRONO_CHUNK_LABEL] = layer0
    return counts


def read_documents(paths: Sequence[Path]) -> list["Document"]:
    """UTF-8 text files (folders: their text files, recursively), ids = absolute paths."""
    from llama_index.core import Document

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
            if not found:
                raise BadDocumentError(f"{path} holds no text files ({', '.join(TEXT_SUFFIXES)})")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    documents = []
    for file in files:
        try:
            text = file.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadDocumentError(f"{file} is not UTF-8 text ({exc.reason})") from exc
        resolved = file.resolve()
        documents.append(
            Document(
                text=text,
                id_=str(resolved),
                metadata={"file_name": resolved.name, "file_path": str(resolved)},
                excluded_embed_metadata_keys=["file_path"],
                excluded_llm_metadata_keys=["file_path"],
            )
        )
    return documents


def _has_store(store: Path) -> bool:
    return (store / "index_store.json").is_file()


def load_store(store: Path, progress: bool = False, **kwargs: object) -> "E2RAGIndex":
    """Load the e2rag index persisted in ``store`` (clear error if there is none)."""
    from llama_index.core import StorageContext, load_index_from_storage

    from llama_index_e2rag.index import E2RAGIndex

    if not _has_store(store):
        raise E2RAGError(f"no e2rag store at {store} (create one with: e2rag index PATH --store)")
    from tqdm.auto import tqdm

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    with tqdm(total=2, desc="Loading store", unit="step", disable=not progress) as bar:
        bar.set_postfix_str("llama-index files")
        storage = StorageContext.from_defaults(persist_dir=str(store))
        bar.update()
        bar.set_postfix_str("e2rag stores")
        index = load_index_from_storage(storage, persist_dir=str(store), **kwargs)
        bar.update()
    if not isinstance(index, E2RAGIndex):
        raise E2RAGError(f"{store} holds a {type(index).__name__}, not an e2rag index")
    return index


if __name__ == "__main__":
    sys.exit(main())
