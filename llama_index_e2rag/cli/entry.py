"""``e2rag`` command line: index files, query a store, show what is in it, run the demo.

Models are resolved as everywhere else (``Settings`` > ``OPENAI_API_KEY`` > offline default), so
with nothing configured the CLI builds LLM-free grounded graphs with MiniLM embeddings and answers
extractively. Bad input ends with a one-line reason on stderr and a non-zero exit, never a
traceback (module imports are light and lazy, so that even an early Ctrl-C finds ``main``).
"""

from __future__ import annotations

import argparse
import errno
import json
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional, Sequence

from llama_index_e2rag.cli import errors as cli_errors

from llama_index_e2rag.cli import query as cli_query
from llama_index_e2rag.cli.files import read_documents
from llama_index_e2rag.cli.store import has_store, load_store
from llama_index_e2rag.errors import E2RAGError
from llama_index_e2rag.modes import DEFAULT_MODE, HYDE_VARIANTS, RETRIEVER_MODES

if TYPE_CHECKING:
    from llama_index.core import Document

    from llama_index_e2rag.extract.builders import DocumentBuilder
    from llama_index_e2rag.index import E2RAGIndex

#: ``e2rag serve``'s port unless ``--port`` is given.
DEFAULT_PORT = 8765
#: ``e2rag index`` flags adding a document builder: its ``config_name`` (the argparse dest) ->
#: what it builds.
BUILDER_FLAGS = {
    "chrono": "ChronoRAG's layers",
    "sentence_graph": "the sentence graph",
    "event_graph": "the fused entities and their events",
}


#: What ``e2rag --help`` says first (plain text: argparse prints it as it is).
DESCRIPTION = (
    "e2rag: index books (text, PDF, EPUB, DOCX, HTML) into a narrative store, query it (or serve it over HTTP), show "
    "what it holds, run the demo."
)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (``e2rag: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"e2rag: error: {message} (see e2rag --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="e2rag", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

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
    index.add_argument("--quiet", action="store_true", help="no progress bars")
    index.set_defaults(func=_cmd_index)

    query = commands.add_parser("query", help="answer a question from a store")
    query.add_argument("question")
    source = query.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", type=Path, help="the store folder to load and ask")
    source.add_argument(
        "--server",
        default=None,
        help="ask a running e2rag serve instead, e.g. http://127.0.0.1:8765 (no load per query)",
    )
    query.add_argument(
        "--mode",
        choices=RETRIEVER_MODES,
        default=None,
        help=f"retrieval mode (default {DEFAULT_MODE}; entity_event with --hyde); chrono, "
        "sentence_graph and event_graph need a store indexed with --chrono / --sentence-graph "
        "/ --event-graph",
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
        "--explain",
        action="store_true",
        help="print which signals brought each result (sentence_graph: its hop, the edge that "
        "reached it, the anchor refinement) and, for an after/before/during question, its "
        "anchor: the passage, the confidence, whether it was used and the region",
    )
    query.add_argument("--quiet", action="store_true", help="no progress bars")
    query.set_defaults(func=_cmd_query)

    serve = commands.add_parser(
        "serve", help="keep a store loaded and answer queries over HTTP (OpenAPI page at /docs)"
    )
    serve.add_argument("--store", required=True, type=Path, help="the store folder to serve")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks a free one"
    )
    serve.add_argument("--quiet", action="store_true", help="no progress bar, no request log")
    serve.set_defaults(func=_cmd_serve)

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
    show.set_defaults(func=_cmd_show)

    timeline = commands.add_parser(
        "timeline", help="a character's mentions and events in story order"
    )
    timeline.add_argument("name", help="the entity's name (a part of it will do when unique)")
    timeline.add_argument("--store", required=True, type=Path)
    timeline.add_argument("--doc", default=None, help="only this document (its id)")
    timeline.add_argument("--limit", type=int, default=None, help="print at most this many")
    timeline.add_argument("--json", action="store_true", help="print JSON instead of lines")
    timeline.set_defaults(func=_cmd_timeline)

    repair = commands.add_parser(
        "repair", help="rebuild what a damaged store lost from what is intact"
    )
    repair.add_argument("--store", required=True, type=Path)
    repair.add_argument("--quiet", action="store_true", help="no progress bars")
    repair.set_defaults(func=_cmd_repair)

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
    """Entry point of the ``e2rag`` script; returns the exit code.

    The one place where exceptions become messages: 0 on success; 1 with one line
    ``e2rag: error: <reason>`` on stderr for any failure (an unexpected one also names the log
    file holding its traceback); 130 with ``e2rag: interrupted`` for Ctrl-C; 2 for usage errors
    (argparse); a closed stdout pipe (``| head``) ends quietly with 1. As the ``e2rag`` script
    (``argv`` None), a Ctrl-C ends the process once the message is out: the work it started
    has been stopped by then (``background``), and tearing down every module took seconds.
    """
    args = build_parser().parse_args(argv)
    restore_ctrl_c = cli_errors.quiet_workers_on_ctrl_c()
    try:
        code = _run(args, sys.argv[1:] if argv is None else argv)
    finally:
        restore_ctrl_c()
    if code == 130 and argv is None:
        cli_errors.end_process(code)
    return code


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe fails here, not in Python's flush at exit
        return code
    except SystemExit:
        raise
    except BaseException as exc:  # every failure ends as one line, never a traceback
        try:
            return _fail(exc, getattr(args, "store", None), argv)
        except KeyboardInterrupt:  # a second Ctrl-C while reporting the first failure
            _say("e2rag: interrupted")
            return 130


def _say(line: str) -> None:
    """Print one line on stderr; a closed stderr cannot turn it into a traceback."""
    try:
        print(line, file=sys.stderr, flush=True)
    except Exception:
        pass


def _fail(exc: BaseException, store: Optional[Path], argv: Sequence[str]) -> int:
    """Say why the command failed, in one line, and return the exit code."""
    if cli_errors.interrupted(exc):
        _say("e2rag: interrupted")
        return 130
    if isinstance(exc, BrokenPipeError) and cli_errors.stdout_closed():
        cli_errors.silence_stdout()
        return 1
    reason = _expected_reason(exc, store)
    if reason is None:  # a bug, or a failure nobody foresaw: keep the traceback for the report
        log = cli_errors.write_log(exc, argv)
        saved = (
            f"traceback in {log}"
            if log
            else "traceback not saved: no writable log folder; set XDG_STATE_HOME to one"
        )
        what = f"unexpected {type(exc).__name__}"
        message = cli_errors.first_line(exc)
        reason = _damaged_reason(exc, store) or (
            f"could not load the store {store} ({what}: {message}); if it is damaged, "
            f"run e2rag repair --store {store}"
            if store is not None and cli_errors.passed_through(exc, load_store.__code__)
            else f"{what}: {message}" if message else what
        )
        reason += f" ({saved})"
    _say(f"e2rag: error: {reason}")
    return 1


def _expected_reason(exc: BaseException, store: Optional[Path]) -> Optional[str]:
    """The one-line reason of a failure we foresee (bad input, damaged store, missing extra,
    permissions, full disk), or None."""
    sqlite_error = cli_errors.find_in_chain(exc, sqlite3.Error)
    if sqlite_error is not None:  # busy, read-only, unreachable: not a damaged database
        reason = _sqlite_reason(sqlite_error, store)  # type: ignore[arg-type]
        if reason is not None:
            return reason
        if isinstance(exc, sqlite3.Error):
            repair = f"; run e2rag repair --store {store}" if store is not None else ""
            db = _graph_db(store)
            return f"damaged graph database {db} ({cli_errors.first_line(exc)}){repair}"
    if isinstance(exc, E2RAGError):
        reason = cli_errors.first_line(exc) or type(exc).__name__
        damaged = any(word in reason for word in ("damaged", "corrupt", "truncated"))
        if damaged and store is not None and "repair" not in reason:
            reason += f" (or run e2rag repair --store {store})"
        return reason
    if isinstance(exc, OSError):
        return _os_reason(exc, store)
    if isinstance(exc, ImportError):
        extra = cli_errors.missing_extra(exc)
        module = exc.name or "a module"
        if extra:
            return f"{module} is not installed: pip install \"llama-index-e2rag[{extra}]\""
        return f"{cli_errors.first_line(exc)}; reinstall llama-index-e2rag or install {module}"
    if isinstance(exc, ValueError):  # bad input, or a store file llama-index could not parse
        if cli_errors.raised_in(exc, __file__) or cli_errors.raised_in(exc, cli_query.__file__):
            # our own checks of the arguments
            return cli_errors.first_line(exc)
        damaged = _damaged_reason(exc, store)
        if damaged:
            return damaged
        reason = cli_errors.first_line(exc) or type(exc).__name__
        if store is not None and cli_errors.passed_through(exc, load_store.__code__):
            return (f"could not load the store {store} ({reason}); if it is damaged, "
                    f"run e2rag repair --store {store}")
        if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
            return None  # a file we cannot name: keep the traceback, it shows which
        return reason
    return None


def _damaged_reason(exc: BaseException, store: Optional[Path]) -> Optional[str]:
    """'damaged store file …; run e2rag repair' when a file of ``store`` is broken."""
    damaged = cli_errors.damaged_files(store)
    if not damaged:
        return None
    path, problem = damaged[0]
    more = f" (and {len(damaged) - 1} more damaged file(s))" if len(damaged) > 1 else ""
    return (f"damaged store file {path}: {problem}{more}; "
            f"run e2rag repair --store {store}")


def _graph_db(store: Optional[Path]) -> object:
    return store / "e2rag" / "graph.sqlite" if store is not None else "the graph database"


def _sqlite_reason(exc: sqlite3.Error, store: Optional[Path]) -> Optional[str]:
    """The reason when the graph database is busy, read-only or unreachable (None when it may
    be damaged: the error that carries it says so, naming the file)."""
    db = _graph_db(store)
    message = cli_errors.first_line(exc)
    low = message.lower()
    if "locked" in low or "busy" in low:
        return f"{db} is busy (another e2rag process is writing it); run again when it is done"
    if "readonly" in low or "read-only" in low:
        return (f"{db} is read-only ({message}); e2rag needs write access to the store folder, "
                "also to query it: check its permissions")
    if "unable to open" in low:
        return f"cannot open {db} ({message}); check that you may read and write it and its folder"
    if "disk is full" in low or "disk i/o" in low:
        return f"cannot write {db} ({message}); free some disk space and run again"
    return None


def _os_reason(exc: OSError, store: Optional[Path]) -> str:
    """A file-system failure in words, with what to do about it."""
    if store is not None and store.is_file() and exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"--store {store} is a file; give a folder (e2rag creates it if it is missing)"
    if not exc.strerror:  # raised by us with a full message
        return cli_errors.first_line(exc) or type(exc).__name__
    where = f": {exc.filename}" if exc.filename is not None else ""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied{where}; check the permissions of it and of its folder"
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"no space left on the disk{where}; free some space and run again"
    if exc.errno == errno.EROFS:
        return f"read-only file system{where}; use a --store on a writable disk"
    if exc.errno == errno.ENOENT:
        return f"no such file or folder{where}"
    return f"{exc.strerror}{where}"


# -- commands ------------------------------------------------------------------------------------
def _cmd_index(args: argparse.Namespace) -> int:
    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.persist.ownership import Kind, claim, release
    from llama_index_e2rag.ingest.validation import validate_documents

    flags = [flag for flag in BUILDER_FLAGS if getattr(args, flag)]
    if not args.paths and not (flags and has_store(args.store)):
        raise E2RAGError(
            "name the files or folders to index (without any, e2rag index only adds a layer "
            "flag's layer, e.g. --chrono, to an existing store)"
        )
    documents = read_documents(args.paths, encoding=args.encoding)
    validate_documents(documents)  # bad input writes nothing, not even the folder
    # ours, or refused, before anything is written (the LLM cache below lives in it)
    was = claim(args.store, "--store").kind
    existing = was is Kind.STORE
    options = {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "combined": args.combined or None,
        "show_progress": not args.quiet,
        "cache_dir": str(args.store),
        "allow_duplicates": args.allow_duplicates,
    }
    builders = default_builders(flags)
    unchanged = 0
    added = None
    if existing:  # the flags add to the builders the store restores
        index = load_store(args.store, progress=not args.quiet, **options)
        records = index.graph_store.doc_records()
        documents, skipped = _skip_same_text(documents, records, args.allow_duplicates)
        changed = [d for d in documents if (records.get(d.id_) or {}).get("hash") != d.hash]
        unchanged = len(documents) - len(changed)
        if changed:  # extracted with the store's builders; the new layers come next, for all
            index.insert_documents(changed)
        added = index.add_layers(builders, documents)
        documents = changed
        index.storage_context.persist(str(args.store))
    else:  # a new store, or what a first save killed before it finished left: written over
        documents, skipped = _skip_same_text(documents, {}, args.allow_duplicates)
        try:
            index = E2RAGIndex.from_documents(documents, doc_builders=builders, **options)
        except BaseException:  # stopped before saving: leave the folder as the user had it
            release(args.store, was)
            raise
        index.storage_context.persist(str(args.store))
    from llama_index_e2rag.cli.show import node_counts

    counts = node_counts(index.graph_store)
    failures = index.extraction_report()
    notes = [f"{unchanged} unchanged, not extracted again"] if unchanged else []
    notes += [f"{skipped} skipped: same text as another"] if skipped else []
    said = f" ({'; '.join(notes)})" if notes else ""
    print(
        f"indexed {len(documents)} document(s){said} into {args.store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
        + (f"; {len(failures)} chunk(s) failed extraction (see e2rag show)" if failures else "")
    )
    if added is not None and added.names:
        what = " and ".join(BUILDER_FLAGS.get(name, name) for name in added.names)
        print(f"added {what} to {added.documents} document(s) ({added.nodes} new nodes), "
              "from the stored graph, without extracting them again")
    return 0


def _skip_same_text(
    documents: list["Document"], records: dict[str, dict[str, object]], allow: bool
) -> tuple[list["Document"], int]:
    """The documents without those whose text the store or an earlier file holds (a notice
    line each on stderr), and how many were skipped."""
    from llama_index_e2rag.stores.same_text import find_duplicates

    duplicates = [] if allow else find_duplicates(documents, records)
    for duplicate in duplicates:
        _say(f"e2rag: {duplicate.notice('--allow-duplicates')}")
    skipped = {d.doc_id for d in duplicates}
    return [d for d in documents if d.id_ not in skipped], len(skipped)


def default_builders(names: Sequence[str]) -> list["DocumentBuilder"]:
    """The restorable document builders ``names`` (``config_name``s), default settings."""
    from llama_index_e2rag.extract.builders import restore_builders

    return restore_builders({name: {} for name in names})


def _cmd_query(args: argparse.Namespace) -> int:
    from llama_index_e2rag.cli.query import QueryOptions, print_result, run_query

    options = QueryOptions(
        args.question, args.mode, args.hyde, args.top_k, args.budget_words
    ).checked()
    if args.server is not None:
        from llama_index_e2rag.cli.serve import ask_server

        result = ask_server(args.server, options)
    else:
        index = load_store(args.store, progress=not args.quiet)
        result = run_query(index, args.store, options)
    print_result(result, args.explain, sys.stdout)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from llama_index_e2rag.cli.serve import serve

    return serve(args.store, args.host, args.port, quiet=args.quiet)


def _cmd_repair(args: argparse.Namespace) -> int:
    from llama_index_e2rag.maintenance.repair import repair_store

    report = repair_store(args.store, show_progress=not args.quiet)
    if not report.before.problems and not report.actions:
        print(f"{args.store}: nothing to repair")
    for problem in report.before.problems:
        print(f"found: {problem}")
    for action in report.actions:
        print(f"repaired: {action}")
    after = report.after
    if after is not None and after.problems:
        for problem in after.problems:
            print(f"still damaged: {problem}")
        raise E2RAGError(f"{args.store} is still damaged after repair (see above)")
    print(f"{args.store}: the store is whole")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from llama_index_e2rag.cli.show import cmd_show

    return cmd_show(args)


def _cmd_timeline(args: argparse.Namespace) -> int:
    from llama_index_e2rag.extract.event_graph.entities import fused_entities
    from llama_index_e2rag.modes import layer_missing_cli
    from llama_index_e2rag.context.timeline import entity_timeline, format_timeline, timeline_dict

    if args.limit is not None and args.limit < 1:
        raise E2RAGError(f"--limit must be at least 1, got {args.limit}")
    index = load_store(args.store)
    if not fused_entities(index.graph_store):
        raise E2RAGError(layer_missing_cli("event_graph", args.store, "e2rag timeline"))
    found = entity_timeline(index.graph_store, args.name, doc_id=args.doc)
    if args.json:
        print(json.dumps(timeline_dict(found), ensure_ascii=False, indent=1))
    else:
        print(format_timeline(found, limit=args.limit))
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from llama_index_e2rag.maintenance.migrate import migrate_store

    counts = migrate_store(args.store)
    print(
        f"converted {args.store}: "
        + ", ".join(f"{n} {kind}" for kind, n in counts["nodes"].items())
        + f"; {sum(counts['vectors'].values())} vectors"
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from llama_index_e2rag.app.demo import run_demo

    return run_demo(store_dir=str(args.store) if args.store else None)


if __name__ == "__main__":
    sys.exit(main())
