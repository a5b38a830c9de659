"""Ingestion on Ray against one process: 100 FairytaleQA stories, offline default build.

``python -m benchmarks.ray_scaling --workers 0`` builds in one process; ``--workers N`` stages on
N Ray actors of a local cluster (``ray.init(num_cpus=max(2, N))``) and commits in the driver.
One configuration per run (a fresh process, so peaks are its own); prints one JSON line:
wall and CPU seconds, the driver's CPU and peak RSS, each worker's CPU and peak RSS (sampled
from ``/proc`` twice a second: Ray names its actor processes ``ray::DocumentStager``), and the
commit's wall and CPU (``IndexWriter._acommit_staged``, driver only). Results are written up by
hand in ``benchmarks/results/ray-scaling.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.loaders import load_fairytaleqa

_TICK = os.sysconf("SC_CLK_TCK")


def _stories(count: int) -> list[Any]:
    """The ``count`` shortest FairytaleQA train stories (whole stories, real text)."""
    from llama_index.core import Document

    stories = sorted(load_fairytaleqa(split="train"), key=lambda s: (len(s.text), s.doc_id))
    return [Document(text=s.text, id_=s.doc_id) for s in stories[:count]]


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class WorkerSampler(threading.Thread):
    """CPU seconds and peak RSS of every ``ray::DocumentStager`` process, sampled."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cpu: dict[int, float] = {}
        self.peak_mb: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if not cmdline.startswith(b"ray::DocumentStager"):
                        continue
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    self.cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
                    self.peak_mb[pid] = _status_kb(pid, "VmHWM") / 1024
                except (OSError, IndexError, ValueError):
                    continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=0, help="0: one process, no Ray")
    parser.add_argument("--docs", type=int, default=100)
    args = parser.parse_args()

    from llama_index_e2rag.index import E2RAGIndex
    from llama_index_e2rag.ingest.ray_workers import RayIngest
    from llama_index_e2rag.ingest.writer import IndexWriter

    commit = {"wall": 0.0, "cpu": 0.0}
    inner = IndexWriter._acommit_staged

    async def timed(self: Any, staged: Any, vectors: Any) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        await inner(self, staged, vectors)
        commit["wall"] += time.perf_counter() - wall
        commit["cpu"] += time.process_time() - cpu

    IndexWriter._acommit_staged = timed  # type: ignore[method-assign]
    docs = _stories(args.docs)
    words = sum(len(d.text.split()) for d in docs)
    ray_option = None
    if args.workers:
        import ray

        ray.init(num_cpus=max(2, args.workers), include_dashboard=False)
        ray_option = RayIngest(workers=args.workers)
    sampler = WorkerSampler()
    sampler.start()
    load = os.getloadavg()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as store:
        index = E2RAGIndex.from_documents(docs, ray=ray_option)
        wall = time.perf_counter() - start
        index.storage_context.persist(store)
        nodes = sum(len(page) for page in index.graph_store.scan_nodes())
    sampler.done.set()
    sampler.join()
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # spaCy's forked parse workers
    driver_cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    worker_cpu = sum(sampler.cpu.values())
    print(json.dumps({
        "workers": args.workers,
        "docs": len(docs),
        "words": words,
        "nodes": nodes,
        "wall_s": round(wall, 1),
        "cpu_s": round(driver_cpu + worker_cpu, 1),
        "driver_cpu_s": round(driver_cpu, 1),
        "driver_peak_mb": round(_status_kb(os.getpid(), "VmHWM") / 1024),
        "worker_cpu_s": sorted(round(c, 1) for c in sampler.cpu.values()),
        "worker_peak_mb": sorted(round(m) for m in sampler.peak_mb.values()),
        "commit_wall_s": round(commit["wall"], 2),
        "commit_cpu_s": round(commit["cpu"], 2),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }))


if __name__ == "__main__":
    main()
