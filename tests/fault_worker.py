"""A child process for the fault-injection tests: runs one write scenario on a store and, when
told, kills itself with SIGKILL just before its K-th write step.

    python tests/fault_worker.py SCENARIO STORE_DIR K
    python tests/fault_worker.py serve     (lines "SCENARIO STORE_DIR K" on stdin)

Write steps are the points where a write reaches the disk: ``os.replace`` / ``os.rename``,
``os.fsync``, and each graph transaction's commit (``SQLGraphStore._bump`` runs inside it); the
scenarios converting a 0.1.0 store (``LEGACY_SCENARIOS``) count each ``os.unlink`` too, as the
conversion ends by removing 0.1.0's vector files. With K = 0 nothing is killed and the worker
prints the number of steps it made.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hash_embedding import HashEmbedding  # noqa: E402
from scripted_llm import ScriptedLLM  # noqa: E402

NAMES = ["Hermione", "Ron", "Harry", "Neville"]
OLD = (
    "Hermione studied alone. Hermione quoted the school rules to Ron and refused to break any "
    "rule. Ron mocked Hermione in the Charms lesson.\n\nNeville lost his toad on the train. "
    "Neville searched every carriage for the toad while the rain fell outside."
)
NEW = (
    "On Halloween a troll entered the girls bathroom. Hermione lied to the teachers to protect "
    "Harry and Ron after the troll fight. Then Hermione broke the rules for her friends."
)
SEQUEL = (
    "Harry found the mirror at night. Harry saw his parents in the mirror. Dumbledore warned "
    "Harry about the mirror in December."
)
STEPS = 0
#: Scenarios that convert a copy of ``data/store_0_1_0`` (made with HashEmbedding(dim=32)).
LEGACY_SCENARIOS = ("migrate", "convert", "convert_insert")
LEGACY_DIM = 32


def _arm(kill_at: int, unlinks: bool = False) -> None:
    """Count write steps; die at step ``kill_at``."""
    from llama_index_e2rag.graph import sql_store

    def step() -> None:
        global STEPS
        STEPS += 1
        if STEPS == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(fn):
        def wrapped(*args, **kwargs):
            step()
            return fn(*args, **kwargs)

        return wrapped

    os.replace = wrap(os.replace)
    os.rename = wrap(os.rename)
    os.fsync = wrap(os.fsync)
    sql_store.SQLGraphStore._bump = wrap(sql_store.SQLGraphStore._bump)
    if unlinks:
        os.unlink = wrap(os.unlink)


def options() -> dict:
    return dict(llm=ScriptedLLM(names=NAMES), embed_model=HashEmbedding(), chunk_size=40,
                chunk_overlap=0)


def load(store: Path):
    from llama_index.core import StorageContext, load_index_from_storage

    import llama_index_e2rag.index  # noqa: F401  (registers the index type with llama-index)

    return load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(store)), persist_dir=str(store), **options()
    )


def legacy_options() -> dict:
    return dict(llm=ScriptedLLM(names=NAMES), embed_model=HashEmbedding(dim=LEGACY_DIM))


def load_legacy(store: Path):
    """A 0.1.0 store loaded the plain llama-index way (converted in memory)."""
    from llama_index.core import StorageContext, load_index_from_storage

    import llama_index_e2rag.index  # noqa: F401

    return load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(store)), **legacy_options()
    )


def build(store: Path) -> None:
    """The store every other scenario starts from: document ``a`` (OLD)."""
    from llama_index.core import Document

    from llama_index_e2rag.index import E2RAGIndex

    index = E2RAGIndex.from_documents([Document(text=OLD, id_="a")], **options())
    index.storage_context.persist(str(store))


def main(scenario: str, store: Path, kill_at: int) -> None:
    from llama_index.core import Document

    _arm(kill_at, unlinks=scenario in LEGACY_SCENARIOS)
    if scenario == "first_save":
        build(store)
    elif scenario == "insert":
        index = load(store)
        index.insert(Document(text=SEQUEL, id_="b"))
        index.storage_context.persist(str(store))
    elif scenario == "reinsert":
        index = load(store)
        index.insert(Document(text=NEW, id_="a"))
        index.storage_context.persist(str(store))
    elif scenario == "delete":
        index = load(store)
        index.delete_ref_doc("a")
        index.storage_context.persist(str(store))
    elif scenario == "batch":
        index = load(store)
        index.insert_documents([Document(text=SEQUEL, id_="b"), Document(text=NEW, id_="c")])
        index.storage_context.persist(str(store))
    elif scenario == "migrate":  # ``e2rag migrate --store``
        from llama_index_e2rag.maintenance.migrate import migrate_store

        migrate_store(store)
    elif scenario == "convert":  # the persist after loading a 0.1.0 store
        load_legacy(store).storage_context.persist(str(store))
    elif scenario == "convert_insert":  # ... after adding a document to it
        index = load_legacy(store)
        index.insert(Document(text=SEQUEL, id_="book3"))
        index.storage_context.persist(str(store))
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    print(STEPS)


def serve() -> None:
    import llama_index.core  # noqa: F401  (imported once, before the forks)

    import llama_index_e2rag.index  # noqa: F401
    import llama_index_e2rag.extract.e2rag  # noqa: F401
    import llama_index_e2rag.persist.legacy  # noqa: F401

    for line in sys.stdin:
        scenario, store, kill_at = line.split()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.dup2(write, 1)
            code = 0
            try:
                main(scenario, Path(store), int(kill_at))
                sys.stdout.flush()
            except BaseException as exc:  # a failure is an answer too
                print(f"error {type(exc).__name__}: {exc}", file=sys.stderr)
                code = 1
            os._exit(code)
        os.close(write)
        with os.fdopen(read) as out:
            printed = out.read().split()
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(code, printed[-1] if printed else -1, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
