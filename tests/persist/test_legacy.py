"""``persist.legacy``: the 0.1.0 format is recognised and opened without the index."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from llama_index_e2rag.persist import legacy
from llama_index_e2rag.persist.index_store import read_struct
from llama_index_e2rag.schema import CHUNK_NODE_ATTR, NodeKind

LEGACY = Path(__file__).parents[1] / "data" / "store_0_1_0"


def test_a_0_1_0_store_is_recognised_and_opened_into_todays_stores(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(LEGACY, store)
    assert legacy.is_legacy(store) and not legacy.is_legacy(tmp_path)
    assert legacy.in_struct(read_struct(store)) and not legacy.in_struct({"config": {}})
    context = legacy.legacy_storage(store, fast=True)
    (struct,) = context.index_store.index_structs()
    old = json.loads(struct.graph_json)
    graph, vectors, conversion = legacy.open_legacy(struct, context)
    assert struct.graph_json == "" and graph.counts()["nodes"]
    assert len(graph.nodes()) == len(old["nodes"])
    assert conversion.namespaces and not [n for n in context.vector_stores if n.startswith("e2rag_")]
    assert sum(vectors.count(k) for k in graph.counts()["nodes"]) > 0
    chunks = graph.nodes(NodeKind.CHUNK)
    assert chunks and all(  # 0.1.0 kept chunks in the docstore only; today's graph carries them
        n.attrs[CHUNK_NODE_ATTR]["text"] == context.docstore.get_node(n.id).get_content()
        for n in chunks
    )


def test_the_legacy_module_imports_neither_the_index_nor_llama_index() -> None:
    script = ("import sys, llama_index_e2rag.persist.legacy, llama_index_e2rag.persist.ownership;"
              "print(sorted(m for m in ('llama_index.core', 'llama_index_e2rag.index') "
              "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
