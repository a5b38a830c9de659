"""The ``narrative`` mode's read model on disk, so a new process does not rebuild it.

Building the passage table reads every mention and event of the graph and places each one (at
100k words: 29k nodes, ~2 s, most of a cold ``e2rag query``). It is persisted per content state
(``stores.read_model_file``: ``e2rag index`` writes it after indexing; otherwise the first query
after a write does) and read back by the next process in a few milliseconds.

Besides the content key and checksum every read model has, the file must name the passage ids
the graph holds now. Vectors are not copied into it; they are read from the vector store.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from llama_index_e2rag.ranking.passages import PassageTable, name_words, unit_rows
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.port import Stores

#: The folder of persisted read models, inside the store's ``e2rag/`` folder.
READ_MODELS_DIR = read_model_file.READ_MODELS_DIR
#: Two JSON lines: the content key and the SHA-256 of the second line, then the model.
NARRATIVE_FILE = "narrative.jsonl"
#: Bumped when the encoding or what the table holds changes: an older file is rebuilt.
FORMAT = 1
MODEL = read_model_file.ReadModel(NARRATIVE_FILE, FORMAT)
content_key, write = MODEL.content_key, MODEL.write


def encode(table: PassageTable, chunk_metadata: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The table (without its vectors) and the chunks' metadata as JSON values."""
    return {
        "ids": table.ids,
        "doc_of": table.doc_of.tolist(),
        "starts": table.starts,
        "names": {name: rows.tolist() for name, rows in table.names.items()},
        "events": {
            lemma: [[row, sorted(who)] for row, who in found]
            for lemma, found in table.events.items()
        },
        "named": sorted(table.named),
        "typed": {
            kind: {name: rows.tolist() for name, rows in by_name.items()}
            for kind, by_name in table.typed.items()
        },
        "lengths": [[doc, n] for doc, n in table.lengths.items()],
        "headings": [[doc, list(found)] for doc, found in table.headings.items()],
        "chunk_metadata": chunk_metadata,
    }


def decode(
    data: dict[str, Any], vectors: np.ndarray
) -> tuple[PassageTable, dict[str, dict[str, Any]]]:
    """``encode``'s inverse, with the passages' ``vectors`` (rows in the table's order)."""

    def rows(found: Sequence[int]) -> np.ndarray:
        return np.array(found, dtype=np.int64)

    names = {name: rows(found) for name, found in data["names"].items()}
    table = PassageTable(
        ids=list(data["ids"]),
        doc_of=np.array(data["doc_of"], dtype=np.int64),
        vectors=unit_rows(vectors),
        names=names,
        name_words=name_words(names),
        events={
            lemma: [(int(row), frozenset(who)) for row, who in found]
            for lemma, found in data["events"].items()
        },
        starts=[(int(doc), int(offset)) for doc, offset in data["starts"]],
        named=set(data["named"]),
        typed={
            kind: {name: rows(found) for name, found in by_name.items()}
            for kind, by_name in data["typed"].items()
        },
        lengths={int(doc): int(n) for doc, n in data["lengths"]},
        headings={
            int(doc): tuple((int(offset), str(text)) for offset, text in found)
            for doc, found in data["headings"]
        },
    )
    return table, data["chunk_metadata"]


def read(stores: Stores, key: str, ids: Sequence[str]) -> Optional[dict[str, Any]]:
    """The persisted model of content ``key`` whose passages are ``ids``, else None."""
    data = MODEL.read(stores, key)
    return data if isinstance(data, dict) and data.get("ids") == list(ids) else None
