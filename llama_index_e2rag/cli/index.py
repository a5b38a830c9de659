"""``e2rag index``: read files into a new store, or add documents and layers to an existing one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from llama_index_e2rag.cli.errors import say
from llama_index_e2rag.cli.files import read_documents
from llama_index_e2rag.cli.show import node_counts
from llama_index_e2rag.cli.store import has_store, load_store
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.heap import give_back
from llama_index_e2rag.persist.ownership import Kind, claim, release
from llama_index_e2rag.stores.same_text import find_duplicates
from llama_index_e2rag.text import count_words, word_runs

if TYPE_CHECKING:
    from llama_index.core import Document

    from llama_index_e2rag.extract.builders import DocumentBuilder
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.ingest.layers import LayersAdded

#: Words of text extracted and committed per write of ``e2rag index`` (``--commit-words``): a
#: build holds one group in memory (about 12 kB per word with the default layers), not the whole
#: run, and a killed run keeps the groups already saved (a re-run skips them). A document longer
#: than this is a group of its own.
COMMIT_WORDS = 100_000

#: ``e2rag index`` flags adding a document builder: its ``config_name`` (the argparse dest) ->
#: what it builds.
BUILDER_FLAGS = {
    "chrono": "ChronoRAG's layers",
    "sentence_graph": "the sentence graph",
    "event_graph": "the fused entities and their events",
}


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    index = commands.add_parser("index", help="index files or folders into a store")
    index.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="files or folders of them: .txt and .md; .pdf, .epub, .docx and .html with the "
        "[files] extra (LlamaIndex's file readers); none: only add the flags' layers to the store",
    )
    index.add_argument("--store", required=True, type=Path, help="store folder (created)")
    index.add_argument("--chunk-size", type=int, default=None, help="tokens per chunk")
    index.add_argument("--chunk-overlap", type=int, default=None, help="tokens of overlap")
    index.add_argument("--combined", action="store_true", help="one LLM call per chunk")
    index.add_argument(
        "--chrono",
        action="store_true",
        help="also build ChronoRAG's layers (mode chrono); on an existing store they are added "
        "to its documents without extracting them again, and later runs keep building them",
    )
    index.add_argument(
        "--sentence-graph",
        action="store_true",
        help="also build SentGraph's sentence graph (mode sentence_graph); added to an existing "
        "store's documents like --chrono, keeping the layers it already builds",
    )
    index.add_argument(
        "--event-graph",
        action="store_true",
        help="also build E2GraphRAG's fused entities and events (mode event_graph, e2rag "
        "timeline); added to an existing store's documents like --chrono",
    )
    index.add_argument(
        "--encoding",
        default="utf-8",
        help="the text files' encoding (default utf-8), e.g. latin-1 or cp1252; auto detects "
        "each file's",
    )
    index.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="also index a file whose text is already in the store, or given twice, under "
        "another path (skipped by default, with a notice)",
    )
    index.add_argument(
        "--commit-words",
        type=_positive,
        default=COMMIT_WORDS,
        help=f"documents are extracted and saved in groups of about this many words (default "
        f"{COMMIT_WORDS:,}; a longer document is a group of its own): memory holds one group, "
        "and a stopped run keeps the groups saved (run it again to index the rest)",
    )
    index.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="chunk, extract, build layers and embed on Ray workers (the [ray] extra), "
        "committing here: 'local' starts a cluster of this machine's cores, 'auto' joins the "
        "one 'ray start' runs here, or a cluster's address (ray://host:10001)",
    )
    index.add_argument(
        "--ray-workers",
        type=_positive,
        default=None,
        help="Ray workers (default: one per CPU of the cluster)",
    )
    index.add_argument("--quiet", action="store_true", help="no progress bars")
    index.set_defaults(func=run)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def run(args: argparse.Namespace) -> int:
    """Index ``args.paths`` into ``args.store``; one summary line on stdout."""
    # deferred: llama-index and spaCy, ~7 s (``e2rag --help`` and usage errors stay fast)
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.ingest.validation import validate_documents

    flags = [flag for flag in BUILDER_FLAGS if getattr(args, flag)]
    if not args.paths and not (flags and has_store(args.store)):
        raise E2RAGError(
            "name the files or folders to index (without any, e2rag index only adds a layer "
            "flag's layer, e.g. --chrono, to an existing store)"
        )
    documents = read_documents(args.paths, encoding=args.encoding)
    validate_documents(documents)  # bad input writes nothing, not even the folder
    ray = _ray(args)
    # ours, or refused, before anything is written (the LLM cache below lives in it)
    was = claim(args.store, "--store").kind
    options = {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "combined": args.combined or None,
        "show_progress": not args.quiet,
        "cache_dir": str(args.store),
        "allow_duplicates": args.allow_duplicates,
        "ray": ray,
    }
    builders = default_builders(flags)
    unchanged, added = 0, None
    if was is Kind.STORE:  # the flags add to the builders the store restores
        index = load_store(args.store, progress=not args.quiet, **options)
        documents, skipped, unchanged, added = _add_to(index, documents, builders, args)
    else:  # a new store, or what a first save killed before it finished left: written over
        documents, skipped = _skip_same_text(documents, {}, args.allow_duplicates)
        groups = commit_groups(documents, args.commit_words)
        _announce(1, len(groups), groups[0], args.quiet)
        try:
            index = E2RAGIndex.from_documents(groups[0], doc_builders=builders, **options)
        except BaseException:  # stopped before saving: leave the folder as the user had it
            release(args.store, was)
            raise
        _insert_groups(index, groups[1:], args.store, len(groups), args.quiet, unsaved=True)
    _save(index, args.store, read_models=True)
    _print_summary(index, args.store, len(documents), unchanged, skipped, added)
    return 0


def _ray(args: argparse.Namespace) -> object:
    """``--ray`` as the index's ``ray=`` (``None``: build in this process)."""
    if args.ray is None:
        if args.ray_workers is not None:
            raise E2RAGError("--ray-workers needs --ray (local, auto or a cluster's address)")
        return None
    # deferred: llama-index, like run's imports
    from llama_index_e2rag.ingest.ray_workers import RayIngest, import_ray

    import_ray()  # without Ray: one line naming the extra, before anything is read or written
    address = None if args.ray == "local" else args.ray
    return RayIngest(address=address, workers=args.ray_workers)


def commit_groups(documents: Sequence["Document"], words: int) -> list[list["Document"]]:
    """``documents`` in order, cut into runs of at most ``words`` words (a longer document is
    a run of its own); one empty run when there are none (a new store is still written)."""
    sizes = (count_words(document.text) for document in documents)
    return list(word_runs(documents, sizes, words)) or [[]]


def _insert_groups(
    index: "E2RAGIndex",
    groups: Sequence[list["Document"]],
    store: Path,
    total: int,
    quiet: bool,
    unsaved: bool,
) -> None:
    """Insert each group in turn, saving the store before the next one (and before the first
    when the index holds an ``unsaved`` write): what a stopped run saved stays, whole groups.
    The caller saves after the last."""
    for number, group in enumerate(groups, start=total - len(groups) + 1):
        if unsaved:
            _save(index, store)
        _announce(number, total, group, quiet)
        index.insert_documents(group)
        unsaved = True


def _announce(number: int, total: int, group: Sequence["Document"], quiet: bool) -> None:
    if total > 1 and not quiet:
        words = sum(len(d.text.split()) for d in group)
        say(f"e2rag: group {number} of {total}: {len(group)} document(s), {words:,} words")


def _save(index: "E2RAGIndex", store: Path, read_models: bool = False) -> None:
    """Persist the store; with ``read_models``, also the read models of what it holds now,
    which the next process's first query reads in ms. They are derived from the whole store,
    so a run saves them once, at its end: a store saved between groups derives them on its
    first query instead."""
    index.storage_context.persist(str(store))
    if read_models:
        _save_read_models(index)


def _save_read_models(index: "E2RAGIndex") -> None:
    """The read models of the content just written: the narrative mode's (passage table and
    BM25 index) always, the grounded mode's layout and node matrix (no matrix without mention
    or event nodes), the event and sentence graph views when the store has their layer (else
    deriving them costs for nothing), the search graphs of the kinds too large for an exact scan
    (``stores.kind_search``)."""
    # deferred: llama-index and spaCy, like run's imports (the parser stays fast)
    from llama_index_e2rag.extract.event_graph.builder import EventGraphBuilder
    # deferred: as above
    from llama_index_e2rag.extract.sentence_graph.builder import SentenceGraphBuilder
    # deferred: as above
    from llama_index_e2rag.retrievers import event_graph, passage_cache, sentence_graph

    # deferred: as above
    from llama_index_e2rag.stores import kind_search, node_embeddings

    # deferred: as above
    from llama_index_e2rag.context import document_file

    # deferred: as above
    from llama_index_e2rag.embeddings import release_runtimes

    release_runtimes()  # read models are derived from stored vectors: nothing is embedded
    give_back()
    steps = [passage_cache.save_read_model, document_file.save_read_model,
             kind_search.save_read_models, node_embeddings.save_read_model]
    for builder, mode in ((EventGraphBuilder, event_graph), (SentenceGraphBuilder, sentence_graph)):
        if any(isinstance(b, builder) for b in index.doc_builders):
            steps.append(mode.save_read_model)
    for step in steps:
        step(index.stores)
        give_back()  # each model is derived from the whole store: the next starts from less


def _add_to(
    index: "E2RAGIndex",
    documents: list["Document"],
    builders: list["DocumentBuilder"],
    args: argparse.Namespace,
) -> tuple[list["Document"], int, int, "LayersAdded"]:
    """Extract the new and changed documents into a loaded store, then build the flags'
    layers for all of them; the documents extracted, how many were skipped and unchanged, and
    what the layers added."""
    records = index.graph_store.doc_records()
    documents, skipped = _skip_same_text(documents, records, args.allow_duplicates)
    changed = [d for d in documents if (records.get(d.id_) or {}).get("hash") != d.hash]
    if changed:  # extracted with the store's builders; the new layers come next, for all
        groups = commit_groups(changed, args.commit_words)
        _insert_groups(index, groups, args.store, len(groups), args.quiet, unsaved=False)
    added = index.add_layers(builders, documents)
    return changed, skipped, len(documents) - len(changed), added


def _print_summary(
    index: "E2RAGIndex",
    store: Path,
    indexed: int,
    unchanged: int,
    skipped: int,
    added: Optional["LayersAdded"],
) -> None:
    counts = node_counts(index.graph_store)
    failures = index.extraction_report()
    notes = [f"{unchanged} unchanged, not extracted again"] if unchanged else []
    notes += [f"{skipped} skipped: same text as another"] if skipped else []
    said = f" ({'; '.join(notes)})" if notes else ""
    print(
        f"indexed {indexed} document(s){said} into {store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
        + (f"; {len(failures)} chunk(s) failed extraction (see e2rag show)" if failures else "")
    )
    if added is not None and added.names:
        what = " and ".join(BUILDER_FLAGS.get(name, name) for name in added.names)
        print(f"added {what} to {added.documents} document(s) ({added.nodes} new nodes), "
              "from the stored graph, without extracting them again")


def _skip_same_text(
    documents: list["Document"], records: dict[str, dict[str, object]], allow: bool
) -> tuple[list["Document"], int]:
    """The documents without those whose text the store or an earlier file holds (a notice
    line each on stderr), and how many were skipped."""
    duplicates = [] if allow else find_duplicates(documents, records)
    for duplicate in duplicates:
        say(f"e2rag: {duplicate.notice('--allow-duplicates')}")
    skipped = {d.doc_id for d in duplicates}
    return [d for d in documents if d.id_ not in skipped], len(skipped)


def default_builders(names: Sequence[str]) -> list["DocumentBuilder"]:
    """The restorable document builders ``names`` (``config_name``s), default settings."""
    from llama_index_e2rag.extract.builders import restore_builders  # deferred: spaCy, ~7 s

    return restore_builders({name: {} for name in names})
