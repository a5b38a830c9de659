"""Every graph store runs the same contract tests: ``make_store`` builds an empty one per backend.

The ``postgres`` backend uses the session's throw-away server (``tests/conftest.py``) and a fresh
schema per test, dropped afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from llama_index_e2rag.graph import GraphStore, NetworkXGraphStore, SQLiteGraphStore
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id

MakeStore = Callable[[], GraphStore]


@pytest.fixture(params=["networkx", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory of empty stores of one backend (several calls share one database)."""
    if request.param == "networkx":
        yield NetworkXGraphStore
        return
    opened: list[GraphStore] = []
    if request.param == "postgres":
        pytest.importorskip("psycopg")
        from llama_index_e2rag.graph.postgres_store import PostgresGraphStore

        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("postgres_schema")

        def make() -> GraphStore:
            opened.append(PostgresGraphStore(dsn, schema=schema))
            return opened[-1]

    else:

        def make() -> GraphStore:
            opened.append(SQLiteGraphStore(tmp_path / "graph.sqlite"))
            return opened[-1]

    yield make
    for store in opened:
        store.close()


def node(doc: str, kind: NodeKind, offset: int, text: str, chunk: str | None = None) -> GraphNode:
    """A node of document ``doc`` (order 0 for "a", 1 otherwise) at ``offset``."""
    return GraphNode(
        id=make_id(doc, kind, (offset,), text),
        kind=kind,
        text=text,
        doc_id=doc,
        pos=(0 if doc == "a" else 1, offset, 0),
        span=(offset, offset + len(text)),
        chunk_id=chunk,
        name=text.split(":")[0] if kind == NodeKind.MENTION else None,
        attrs={"description": text},
    )


_LETTERS = "abcXYZ_-éßΩ中😀"


def random_graph(rng: random.Random, doc: str) -> tuple[list[GraphNode], list[GraphEdge]]:
    """A random graph of document ``doc`` (order 0 for "a", 1 otherwise), ids with non-ASCII."""
    kinds = [NodeKind.MENTION, NodeKind.EVENT, NodeKind.SENTENCE]
    nodes = [
        GraphNode(
            id=doc + "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 6))) + str(i),
            kind=rng.choice(kinds),
            doc_id=doc,
            pos=(0 if doc == "a" else 1, rng.randint(0, 30), rng.randint(0, 3)),
            text=rng.choice(["x", "Ünïcode", "he said"]),
            attrs={"k": i} if rng.random() < 0.5 else {},
        )
        for i in range(rng.randint(5, 60))
    ]
    edges = {
        (rng.choice(nodes).id, rng.choice(nodes).id, rng.choice(list(EdgeKind)),
         rng.choice([None, "A0", "A1"]))
        for _ in range(rng.randint(0, 120))
    }
    return nodes, [
        GraphEdge(source=s, target=t, kind=k, role=r, doc_id=doc) for s, t, k, r in sorted(
            edges, key=str)
    ]


# -- durability and concurrency helpers (tests/graph/test_{sqlite,postgres}_store.py) -----------
# A store is described to other processes by a JSON "spec": {"backend": "sqlite", "path": …} or
# {"backend": "postgres", "dsn": …, "schema": …}. Other processes run this file as a script (see
# ``worker`` at the bottom), so what they write and read is built by the same code as here.
WORKER = [sys.executable, str(Path(__file__).resolve())]
#: Longest any helper waits for another process before failing the test.
WAIT_SECONDS = 30.0


def open_spec(spec: dict[str, Any]) -> Any:
    if spec["backend"] == "sqlite":
        return SQLiteGraphStore(spec["path"])
    from llama_index_e2rag.graph.postgres_store import PostgresGraphStore

    return PostgresGraphStore(spec["dsn"], schema=spec["schema"])


def story_doc(doc: str, order: int, n: int, gen: str) -> tuple[list[GraphNode], list[GraphEdge]]:
    """``n`` nodes of document ``doc`` chained by NEXT edges; every generation ``gen`` of the
    document has its own node ids and carries ``gen`` in each node's attrs."""
    nodes = []
    for i in range(n):
        kind = NodeKind.CHUNK if i % 10 == 0 else NodeKind.MENTION
        text = f"{gen} {doc} node {i}"
        nodes.append(
            GraphNode(
                id=make_id(doc, kind, (order, i), text),
                kind=kind,
                text=text,
                doc_id=doc,
                pos=(order, i, 0),
                span=(i, i + len(text)),
                name=f"{doc}{i}" if kind == NodeKind.MENTION else None,
                attrs={"gen": gen},
            )
        )
    edges = [
        GraphEdge(source=a.id, target=b.id, kind=EdgeKind.NEXT, doc_id=doc)
        for a, b in itertools.pairwise(nodes)
    ]
    return nodes, edges


def observe(store: Any, doc: str) -> tuple[int, list[str]]:
    """One read of a document: how many nodes, of which generations (one query)."""
    nodes = store.nodes(doc_id=doc)
    return len(nodes), sorted({n.attrs["gen"] for n in nodes})


def snapshot(store: Any) -> dict[str, Any]:
    return {
        "graph": store.to_dict(),
        "orders": store.doc_orders(),
        "failures": store.failures(),
        "version": store.version,
    }


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def spawn(*args: Any) -> subprocess.Popen:
    """Start a worker process (``worker`` below) with ``args``; its output is piped."""
    return subprocess.Popen(
        [*WORKER, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def run_worker(*args: Any, timeout: float = 60.0) -> str:
    done = subprocess.run(
        [*WORKER, *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"worker {args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


class PausedWriter:
    """A worker process in the middle of ``replace_doc``: it has deleted the old document and
    inserted every new node, and waits (transaction open) before its edges until released."""

    def __init__(
        self, spec: dict, doc: str, order: int, n: int, gen: str, tmp: Path, *extra: str
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.marker, self.release_file = tmp / "inside", tmp / "release"
        self.proc = spawn(
            "replace", json.dumps(spec), doc, order, n, gen, self.marker, self.release_file, *extra
        )
        self.info: dict[str, Any] = wait_for(self._inside, "the writer to be inside replace_doc")

    def _inside(self) -> Optional[dict[str, Any]]:
        if self.proc.poll() is not None:
            raise AssertionError(f"writer exited early:\n{self.proc.communicate()}")
        return json.loads(self.marker.read_text()) if self.marker.exists() else None

    def release(self) -> None:
        self.release_file.touch()
        out, err = self.proc.communicate(timeout=WAIT_SECONDS)
        assert self.proc.returncode == 0, f"writer failed:\n{out}\n{err}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.communicate(timeout=WAIT_SECONDS)


def check_restart(spec: dict[str, Any]) -> None:
    """What one process writes, a later process reads back exactly."""
    written = json.loads(run_worker("fill", json.dumps(spec)))
    read = json.loads(run_worker("dump", json.dumps(spec)))
    assert read == written
    a_nodes, _ = story_doc("a", 0, 50, "g1")
    assert [n["id"] for n in read["graph"]["nodes"] if n["doc_id"] == "a"] == sorted(
        n.id for n in a_nodes
    )
    assert read["orders"] == {"a": 0, "b": 1}
    assert read["failures"] == [{"doc_id": "b", "chunk_id": "c9", "reason": "no events"}]
    assert len(read["graph"]["edges"]) == 49 + 29 and read["version"] > 0


def check_readers_during_replace(spec: dict[str, Any], tmp: Path) -> None:
    """Reader threads (own stores and one shared store) and a reader process, all reading while
    a writer process sits inside a large ``replace_doc``, see the whole old document until it
    commits and the whole new one afterwards: never a missing or mixed document."""
    old, new = (400, ["old"]), (1500, ["new"])
    with closing(open_spec(spec)) as store:
        store.replace_doc("big", 0, *story_doc("big", 0, old[0], "old"))
        store.replace_doc("other", 1, *story_doc("other", 1, 10, "other"))
    stop = threading.Event()
    seen: dict[str, list[tuple[float, float, tuple[int, list[str]]]]] = {}
    shared = open_spec(spec)

    def read(name: str, store: Any) -> None:
        log = seen.setdefault(name, [])
        while not stop.is_set():
            start = time.time()
            state = observe(store, "big")
            log.append((start, time.time(), state))

    own = [open_spec(spec) for _ in range(2)]
    threads = [threading.Thread(target=read, args=(f"own{i}", s)) for i, s in enumerate(own)]
    threads += [threading.Thread(target=read, args=(f"shared{i}", shared)) for i in range(2)]
    log_file, stop_file = tmp / "reader.jsonl", tmp / "reader.stop"
    reader = spawn("read", json.dumps(spec), "big", log_file, stop_file)
    writer: Optional[PausedWriter] = None
    try:
        for thread in threads:
            thread.start()
        writer = PausedWriter(spec, "big", 0, new[0], "new", tmp / "writer")
        paused = time.time()

        def during() -> bool:  # every reader has read at least 3 times since the pause
            logs = list(seen.values()) + [_read_log(log_file)]
            return len(logs) == 5 and all(sum(s >= paused for s, _, _ in log) >= 3 for log in logs)

        wait_for(during, "readers to read while the writer is inside its transaction")
        released = time.time()
        writer.release()
        committed = time.time()
        def after() -> bool:  # every reader has read at least 3 times since the commit
            logs = list(seen.values()) + [_read_log(log_file)]
            return all(sum(s >= committed for s, _, _ in log) >= 3 for log in logs)

        wait_for(after, "readers to read after the commit")
    finally:
        stop.set()
        stop_file.touch()
        for thread in threads:
            thread.join(WAIT_SECONDS)
        if writer is not None:
            writer.kill()
        reader.communicate(timeout=WAIT_SECONDS)
        for s in [shared, *own]:
            s.close()
    assert reader.returncode == 0
    seen["process"] = _read_log(log_file)
    for name, log in seen.items():
        states = [(n, gens) for _, _, (n, gens) in log]
        assert set(map(_key, states)) <= {_key(old), _key(new)}, f"{name} saw {_runs(states)}"
        during_pause = [state for s, e, state in log if s >= paused and e <= released]
        assert during_pause and all(_key(s) == _key(old) for s in during_pause), name
        after = [state for s, _, state in log if s >= committed]
        assert after and all(_key(s) == _key(new) for s in after), name
        assert len(_runs(states)) <= 2, f"{name} went back to the old document: {_runs(states)}"


def _runs(states: list[Any]) -> list[tuple[tuple[int, tuple[str, ...]], int]]:
    """``states`` run-length encoded: [(state, times in a row), …]."""
    runs: list[tuple[tuple[int, tuple[str, ...]], int]] = []
    for state in map(_key, states):
        if runs and runs[-1][0] == state:
            runs[-1] = (state, runs[-1][1] + 1)
        else:
            runs.append((state, 1))
    return runs


def _key(state: Any) -> tuple[int, tuple[str, ...]]:
    return int(state[0]), tuple(state[1])


def _read_log(path: Path) -> list[tuple[float, float, tuple[int, list[str]]]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.endswith("}"):
            row = json.loads(line)
            rows.append((row["start"], row["end"], (row["n"], row["gens"])))
    return rows


def check_killed_writer(
    spec: dict[str, Any],
    tmp: Path,
    in_transaction: Callable[[dict[str, Any]], bool],
    after_kill: Callable[[dict[str, Any]], None] = lambda info: None,
) -> None:
    """SIGKILL a writer inside a large ``replace_doc`` (``in_transaction`` proves, from outside,
    that its transaction is open with uncommitted rows; ``after_kill`` waits until the database
    has noticed): the previous state survives exactly, and the next writer is not blocked."""
    with closing(open_spec(spec)) as store:
        store.replace_doc("big", 0, *story_doc("big", 0, 500, "old"), [{"reason": "old"}])
        store.replace_doc("other", 1, *story_doc("other", 1, 10, "other"))
        before = snapshot(store)
    writer = PausedWriter(spec, "big", 0, 20000, "new", tmp / "writer")
    try:
        assert in_transaction(writer.info), "the writer's transaction is not open"
    finally:
        writer.kill()
    assert writer.proc.returncode == -signal.SIGKILL
    after_kill(writer.info)
    after = json.loads(run_worker("dump", json.dumps(spec)))
    assert after == json.loads(json.dumps(before))
    with closing(open_spec(spec)) as store:  # the lock died with the writer
        store.replace_doc("big", 0, *story_doc("big", 0, 20, "next"))
        assert observe(store, "big") == (20, ["next"])
        assert observe(store, "other") == (10, ["other"])


def check_same_doc_writers(
    spec: dict[str, Any], tmp: Path, queued: Callable[[dict[str, Any]], Any]
) -> None:
    """Writer 2 replaces the document writer 1 is replacing, while writer 1 is inside its
    transaction (``queued`` confirms writer 2 is waiting). Writer 2 must run after writer 1 and
    leave exactly its own generation: never both generations' nodes at once."""
    with closing(open_spec(spec)) as store:
        store.replace_doc("big", 0, *story_doc("big", 0, 100, "old"))
    first = PausedWriter(spec, "big", 0, 300, "first", tmp / "first")
    started = tmp / "second.started"
    second = spawn("replace", json.dumps(spec), "big", 0, 200, "second", f"--started={started}")
    finish_second_after_first(
        first,
        second,
        [(started.exists, "the second writer to start"),
         (lambda: queued(first.info), "the second writer to wait for the first")],
        still_waiting=True,
    )
    with closing(open_spec(spec)) as store:
        assert observe(store, "big") == (200, ["second"])
        assert store.failures() == [{"doc_id": "big", "chunk_id": "c0", "reason": "second"}]


# -- the worker: ``python tests/graph/conftest.py COMMAND SPEC …`` ------------------------------
def finish_second_after_first(
    first: "PausedWriter",
    second: subprocess.Popen,
    waits: list[tuple[Callable[[], Any], str]],
    still_waiting: bool = False,
) -> None:
    """Wait for each condition (the second writer queued behind the paused first one), check it
    is ``still_waiting`` if asked, release the first and see the second finish; both processes
    are stopped whatever happens."""
    try:
        for predicate, what in waits:
            wait_for(predicate, what)
        if still_waiting:
            assert second.poll() is None, "the second writer did not wait for the first"
        first.release()
        _, err = second.communicate(timeout=WAIT_SECONDS)
        assert second.returncode == 0, err
    finally:
        first.kill()
        if second.poll() is None:
            second.kill()
            second.communicate()


def _paused(edges: list[GraphEdge], store: Any, marker: Path, release: Path):
    """Yields ``edges`` once ``release`` exists; first writes ``marker`` (pid, backend pid).
    ``replace_doc`` lists its edges inside its transaction, after writing the nodes."""
    info: dict[str, Any] = {"pid": os.getpid()}
    if hasattr(store.conn, "info"):
        info["backend_pid"] = store.conn.info.backend_pid
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, marker)
    deadline = time.monotonic() + 60  # never outlive a crashed test for long
    while not release.exists():
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.005)
    yield from edges


def worker(argv: list[str]) -> None:
    command, spec = argv[0], json.loads(argv[1])
    store = open_spec(spec)
    if command == "fill":
        store.replace_doc("a", 0, *story_doc("a", 0, 50, "g1"))
        store.replace_doc("b", 1, *story_doc("b", 1, 30, "g1"), [{"chunk_id": "c9", "reason": "no events"}])
        print(json.dumps(snapshot(store)))
    elif command == "dump":
        print(json.dumps(snapshot(store)))
    elif command == "replace":  # DOC ORDER N GEN [MARKER RELEASE] [--cross=NODE_ID] [--started=FILE]
        options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))
        cross = [options["cross"]] if "cross" in options else []
        argv = [a for a in argv if not a.startswith("--")]
        doc, order, n, gen = argv[2], int(argv[3]), int(argv[4]), argv[5]
        nodes, edges = story_doc(doc, order, n, gen)
        edges += [  # edges from this document's first node into another document
            GraphEdge(source=nodes[0].id, target=t, kind=EdgeKind.CO_MENTION, doc_id=doc)
            for t in cross
        ]
        if len(argv) > 6:
            edges = _paused(edges, store, Path(argv[6]), Path(argv[7]))
        if "started" in options:
            _ = store.version  # connected
            Path(options["started"]).touch()
        store.replace_doc(doc, order, nodes, edges, [{"chunk_id": "c0", "reason": gen}])
    elif command == "open":  # START: open the store at that moment
        time.sleep(max(0.0, float(argv[2]) - time.time()))
        print(store.version)
    elif command == "rounds":  # DOC ORDER N ROUNDS START: replace DOC ROUNDS times at once
        doc, order, n, rounds, start = argv[2], int(argv[3]), int(argv[4]), int(argv[5]), float(argv[6])
        _ = store.version  # connect (and create the schema) before the start line
        time.sleep(max(0.0, start - time.time()))
        for r in range(rounds):
            store.replace_doc(doc, order, *story_doc(doc, order, n + r, f"r{r}"))
    elif command == "read":  # DOC LOG STOP: log observations until STOP exists
        doc, log, stop = argv[2], Path(argv[3]), Path(argv[4])
        with log.open("a") as out:
            while True:
                last = stop.exists()
                start = time.time()
                n, gens = observe(store, doc)
                out.write(json.dumps({"start": start, "end": time.time(), "n": n, "gens": gens}) + "\n")
                out.flush()
                if last:
                    break
    else:
        raise SystemExit(f"unknown command {command}")
    store.close()


if __name__ == "__main__":
    worker(sys.argv[1:])
