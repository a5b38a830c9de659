"""What importing ``lightrag_ext`` adds to importing LightRAG (target: at most 0.5 s more).

Every import runs in a fresh interpreter (``python -c``), LightRAG's and ours alternating so that
a change in machine load hits both alike; a figure is the median wall time of those interpreters.
Start-up is in both and cancels out of the difference. Two pairs: ``import lightrag`` against
``import lightrag_ext`` (the issue's target; both packages export lazily), and
``from lightrag import LightRAG`` against ``from lightrag_ext import E2LightRAG``, what a user
waits for before the first line of work.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.5
#: name -> (LightRAG's statement, ours)
PAIRS = {
    "package": ("import lightrag", "import lightrag_ext"),
    "class": ("from lightrag import LightRAG", "from lightrag_ext import E2LightRAG"),
}


def _seconds(statement: str, env: dict[str, str]) -> float:
    """Wall time of a fresh interpreter running ``statement``."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, cwd=_REPO, env=env)
    return time.perf_counter() - started


def run_import_cost(runs: int) -> dict[str, Any]:
    """Median import seconds of each pair over ``runs`` fresh interpreters per statement."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
    rows = {}
    for name, (theirs, ours) in PAIRS.items():
        times: dict[str, list[float]] = {theirs: [], ours: []}
        for _ in range(runs):
            for statement in (theirs, ours):
                times[statement].append(_seconds(statement, env))
        base, own = statistics.median(times[theirs]), statistics.median(times[ours])
        rows[name] = {"lightrag": theirs, "lightrag_s": base, "ours": ours, "ours_s": own,
                      "extra_s": own - base, "runs": runs}
    return {"rows": rows, "target_extra_s": TARGET_SECONDS}
