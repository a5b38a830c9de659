"""Build time by stage, retrieval latency per mode, peak memory and on-disk size of an index.

Each measurement runs in a fresh Python process (``python -m benchmarks.speed``) so its peak RSS
belongs to that one build and nothing else. The peak is read from ``/proc/self/status`` (VmHWM):
``getrusage``'s ``ru_maxrss`` survives ``fork``+``exec`` on Linux and would report the parent's
size whenever the parent was larger. Stages
are timed from the outside: "embed" is wall time inside the embedding model (a ``TimedEmbedding``
wrapper), "extract+graph" is the rest of ``from_documents``, "persist" is
``storage_context.persist``. Scaling jobs also time loading the persisted index (latency is then
measured on the loaded index), the ``e2rag query`` / ``e2rag show`` commands on it, and inserting
one more document into it against indexing that document alone. The same child can also answer every question of the book in every
mode (``MeasuredIndex``), so a book is built once for both its speed and its quality figures.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

_REPO = Path(__file__).resolve().parents[1]
#: Questions timed per mode when the child only measures (one extra warm-up is not counted).
LATENCY_QUERIES = 20


def _rss_mb() -> float:
    """Peak resident set size of this process image so far, in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _percentiles(values: Sequence[float]) -> dict[str, Any]:
    array = np.asarray(values, dtype=np.float64) * 1000.0
    return {"p50_ms": float(np.percentile(array, 50)), "p95_ms": float(np.percentile(array, 95)),
            "n": len(values)}


def _within_budget(texts: list[str], budget: int | None) -> list[str]:
    """The ranked passages a word budget can reach (later ones can never be scored)."""
    if budget is None:
        return texts
    kept, used = [], 0
    for text in texts:
        if used >= budget:
            break
        kept.append(text)
        used += len(text.split())
    return kept


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Build, persist and query one index in this process; returns the measurements.

    With ``job["answer_all"]`` every query is answered in every mode and the passages come back
    (cut to ``job["budget"]`` words); otherwise ``LATENCY_QUERIES`` queries are only timed.
    """
    from llama_index.core import Document

    from benchmarks.systems import TimedEmbedding, build_index, make_embed_model

    embed = TimedEmbedding(make_embed_model())
    embed.get_text_embedding("warm-up")  # load the model before the timing and RSS baseline
    embed.reset()
    rss_before = _rss_mb()
    ids = job.get("doc_ids") or [f"doc-{i}" for i in range(len(job["texts"]))]
    documents = [Document(text=text, id_=doc_id) for text, doc_id in zip(job["texts"], ids)]
    started = time.perf_counter()
    if job.get("commit_words"):  # a library as ``e2rag index`` writes it: a group per write,
        from llama_index_e2rag.cli.index import commit_groups  # the store saved between groups

        first, *rest = commit_groups(documents, job["commit_words"])
        index = build_index(first, embed)
        with tempfile.TemporaryDirectory(prefix="e2rag-bench-groups-") as saved:
            for group in rest:
                index.storage_context.persist(persist_dir=saved)
                index.insert_documents(group)
    else:
        index = build_index(documents, embed)
    build_seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "words": sum(len(t.split()) for t in job["texts"]),
        "build_seconds": build_seconds,
        "embed_seconds": embed.seconds,
        "embedded_texts": embed.texts,
        "extract_graph_seconds": max(0.0, build_seconds - embed.seconds),
        "rss_before_build_mb": rss_before,
        "rss_after_build_mb": _rss_mb(),
    }
    counts = getattr(index.graph_store, "counts", None)
    if callable(counts):
        result["graph_counts"] = counts()
    queries = list(job["queries"]) if job.get("answer_all") else job["queries"][:LATENCY_QUERIES]
    with tempfile.TemporaryDirectory(prefix="e2rag-bench-") as folder:
        started = time.perf_counter()
        index.storage_context.persist(persist_dir=folder)
        result["persist_seconds"] = time.perf_counter() - started
        result["disk_bytes"] = _dir_bytes(Path(folder))
        result["peak_rss_build_mb"] = _rss_mb()
        if job.get("loaded"):  # time retrieval on the index as a user loads it
            del index
            started = time.perf_counter()
            index = _load(folder, embed)
            result["load_seconds"] = time.perf_counter() - started
        result["latency"], passages = _query_modes(index, job["modes"], queries, job.get("budget"))
        if job.get("cli"):
            result["cli_seconds"] = _cli_seconds(folder, queries[0])
        if job.get("insert_text"):
            del index
            result["insert"] = _insert_seconds(folder, job["insert_text"], embed)
    if job.get("answer_all"):
        result["passages"] = passages
    result["peak_rss_mb"] = _rss_mb()
    return result


def _load(folder: str, embed: Any) -> Any:
    from llama_index.core import StorageContext, load_index_from_storage

    import llama_index_e2rag.index  # noqa: F401 - registers the index type

    return load_index_from_storage(
        StorageContext.from_defaults(persist_dir=folder), embed_model=embed
    )


def _cli_seconds(folder: str, question: str) -> dict[str, float]:
    """Wall time of ``e2rag query`` and ``e2rag show`` on the persisted store, start-up included
    (what a user waits for at the prompt)."""
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    timings = {}
    for name, args in (("query", ["query", question, "--store", folder]),
                       ("show", ["show", "--store", folder])):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "llama_index_e2rag.cli.entry", *args], check=True,
                       capture_output=True, cwd=_REPO, env=env)
        timings[name] = time.perf_counter() - started
    return timings


def _insert_seconds(folder: str, text: str, embed: Any) -> dict[str, float]:
    """Indexing ``text`` alone (build + persist) against inserting it into the persisted index
    in ``folder`` and persisting."""
    from llama_index.core import Document

    from benchmarks.systems import build_index

    document = Document(text=text, id_="inserted")
    with tempfile.TemporaryDirectory(prefix="e2rag-bench-alone-") as alone:
        started = time.perf_counter()
        build_index([document], embed).storage_context.persist(persist_dir=alone)
        alone_seconds = time.perf_counter() - started
    index = _load(folder, embed)
    started = time.perf_counter()
    index.insert(document)
    index.storage_context.persist(persist_dir=folder)
    return {"alone": alone_seconds, "into_index": time.perf_counter() - started,
            "words": len(text.split())}


def _query_modes(index: Any, modes: Sequence[str], queries: Sequence[str],
                 budget: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per mode: latency percentiles and, per query, its passages or its error message."""
    latency: dict[str, Any] = {}
    passages: dict[str, Any] = {}
    for mode in modes:
        try:
            options = {"budget_words": budget} if budget else {}
            retriever = index.as_retriever(mode=mode, **options)
            retriever.retrieve(queries[0])  # warm-up: lazy caches, first-call imports
        except Exception as exc:  # noqa: BLE001 - a failing mode is reported, not fatal
            latency[mode] = passages[mode] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        times, answers = [], []
        for query in queries:
            started = time.perf_counter()
            try:
                nodes = retriever.retrieve(query)
            except Exception as exc:  # noqa: BLE001
                answers.append({"error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            times.append(time.perf_counter() - started)
            answers.append(_within_budget([n.node.get_content() for n in nodes], budget))
        latency[mode] = _percentiles(times) if times else {"error": answers[0]["error"]}
        passages[mode] = answers
    return latency, passages


def measure_in_subprocess(texts: Sequence[str], modes: Sequence[str], queries: Sequence[str],
                          *, doc_ids: Sequence[str] | None = None, answer_all: bool = False,
                          budget: int | None = None, timeout: float | None = None,
                          loaded: bool = False, cli: bool = False,
                          insert_text: str | None = None,
                          commit_words: int | None = None) -> dict[str, Any]:
    """Run ``run_job`` in a fresh interpreter; failures come back as ``{"error": ...}``."""
    with tempfile.TemporaryDirectory(prefix="e2rag-bench-job-") as folder:
        job_path, out_path = Path(folder) / "job.json", Path(folder) / "result.json"
        job_path.write_text(json.dumps({
            "texts": list(texts), "doc_ids": list(doc_ids or []), "modes": list(modes),
            "queries": list(queries), "answer_all": answer_all, "budget": budget,
            "loaded": loaded, "cli": cli, "insert_text": insert_text,
            "commit_words": commit_words}),
            encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
        env.pop("OPENAI_API_KEY", None)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.speed", str(job_path), str(out_path)],
                capture_output=True, text=True, timeout=timeout, cwd=_REPO, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not out_path.is_file():
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            return {"error": f"exit {proc.returncode}: {tail}"[:500]}
        return json.loads(out_path.read_text(encoding="utf-8"))


class _Node:
    """Just enough of a NodeWithScore for the quality runner (``.node.get_content()``)."""

    def __init__(self, text: str) -> None:
        self.node = self
        self._text = text

    def get_content(self) -> str:
        return self._text


class _Replay:
    """A retriever answering from the child's recorded passages, by question."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self._answers = answers

    def retrieve(self, query: str) -> list[_Node]:
        answer = self._answers[query]
        if isinstance(answer, dict):
            raise RuntimeError(answer["error"])
        return [_Node(text) for text in answer]


class MeasuredIndex:
    """An index built and queried in a clean child process; keeps the speed measurements.

    ``as_retriever(mode)`` replays what the child retrieved for each question, so the quality
    runner scores it like a live index.
    """

    def __init__(self, texts: Sequence[str], doc_ids: Sequence[str], modes: Sequence[str],
                 questions: Sequence[str], budget: int | None) -> None:
        self.questions = list(questions)
        self.measurements = measure_in_subprocess(texts, modes, self.questions, doc_ids=doc_ids,
                                                  answer_all=True, budget=budget)
        if "error" in self.measurements:
            raise RuntimeError(f"child build failed: {self.measurements['error']}")
        self._passages = self.measurements.pop("passages")

    def as_retriever(self, mode: str, budget_words: int | None = None) -> _Replay:
        """The child already retrieved with the run's budget; ``budget_words`` is for the
        runner's uniform call only."""
        answers = self._passages.get(mode)
        if answers is None or isinstance(answers, dict):
            raise RuntimeError((answers or {}).get("error", f"mode {mode} not run"))
        return _Replay(dict(zip(self.questions, answers)))


def main(argv: Sequence[str]) -> int:
    """Child entry point: ``python -m benchmarks.speed JOB.json RESULT.json``."""
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    result = run_job(job)
    tmp = Path(argv[1]).with_suffix(".tmp")
    tmp.write_text(json.dumps(result, default=str), encoding="utf-8")
    tmp.replace(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
