"""An embedded vector folder judged from its manifest alone (``e2rag show``'s light check).

Opening a folder (``EmbeddedVectors.open``) checksums every file and reads every id, which grows
with the store (0.8 s at a million words). The manifest already says what a glance needs: each
file's size, and, since the manifest recorded them, each segment's live rows per document. So a
file cut short or missing is found from ``stat`` alone and the vector counts come without a row;
a file changed in place at the same size is left to the full check (``e2rag show --check``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from llama_index_e2rag.vectors.embedded import FORMAT, MANIFEST, VERSION


@dataclass
class Survey:
    """What the manifest says: ``damaged`` files (one line each, as ``open(salvage=True)``
    lists them) and live vectors per document and kind, None when a segment was saved before
    manifests recorded them (then only opening the folder counts them)."""

    damaged: list[str] = field(default_factory=list)
    doc_counts: Optional[dict[str, dict[str, int]]] = field(default_factory=dict)


def survey(folder: Path) -> Survey:
    """The light check of ``folder``: the manifest is readable, every file it names is there
    with the size it wrote; and the vector counts it recorded."""
    found, manifest_path = Survey(), Path(folder) / MANIFEST
    if not manifest_path.is_file():
        return found  # no vectors saved (the counts against the records say if some should be)
    try:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format") != FORMAT or manifest["version"] > VERSION:
            raise ValueError(f"not an {FORMAT} manifest of version {VERSION} or older")
        entries = list(manifest["segments"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        found.damaged.append(f"{manifest_path}: {exc}")
        return found
    counts: dict[str, dict[str, int]] = {}
    for entry in entries:
        docs = None
        try:
            problem = _size_problem(Path(folder), entry)
            docs = entry.get("docs")
            if problem is None and docs is not None:
                for doc, n in docs.items():
                    per_doc = counts.setdefault(doc, {})
                    per_doc[entry["kind"]] = per_doc.get(entry["kind"], 0) + int(n)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"manifest entry {entry!r:.80} is damaged ({exc})"
        if problem is not None:
            found.damaged.append(f"{entry.get('name') if isinstance(entry, dict) else entry}: "
                                 f"{problem}")
        elif docs is None:
            found.doc_counts = None
    if found.doc_counts is not None:
        found.doc_counts = counts
    return found


def _size_problem(folder: Path, entry: dict) -> Optional[str]:
    """Why a segment's files are not those the manifest wrote, judged by their sizes."""
    crcs = entry.get("crc") or {}
    files = {"npy": f"{entry['name']}.npy", "json": f"{entry['name']}.json"}
    if entry.get("dead"):
        files["dead"] = entry["dead"]
    for ext, name in files.items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        expected = crcs.get(ext)
        if expected is not None and path.stat().st_size != expected[0]:
            return f"{path} is {path.stat().st_size} bytes, not the {expected[0]} it was saved with"
    return None
