"""The ``vector`` mode reads no question: a process that only retrieves with it never loads
spaCy (nor BM25), while a mode that parses the question loads spaCy once.

Real components: the offline default graph (spaCy), MiniLM, a persisted store in a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from persisted_demo import DEMO_QUESTIONS, persist_demo

REPO = Path(__file__).resolve().parents[2]

RETRIEVE = """
import sys
from llama_index_e2rag.maintenance.load import load_index
index = load_index(sys.argv[1])
loaded = lambda name: any(m.split('.')[0] == name for m in sys.modules)
for mode in sys.argv[2:]:
    results = index.as_retriever(mode=mode).retrieve({question!r})
    print(mode, len(results), loaded('spacy'), loaded('bm25s'))
"""


def _retrieve(store: Path, *modes: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    code = RETRIEVE.format(question=DEMO_QUESTIONS[0])
    out = subprocess.run([sys.executable, "-c", code, str(store), *modes], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("\n")[:-1]


def test_retrieving_in_vector_mode_never_loads_spacy(minilm, tmp_path: Path) -> None:
    persist_demo(tmp_path, minilm)
    vector, narrative = _retrieve(tmp_path, "vector", "narrative")
    assert vector.split()[2:] == ["False", "False"] and int(vector.split()[1]) > 0
    assert narrative.split()[2:] == ["True", "True"]  # the narrative mode parses the question
