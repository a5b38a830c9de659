"""The passage table: the read model the ``narrative`` mode ranks, one per index state.

Passages in story order with their unit vectors, and the graph read per passage: which
characters are mentioned where (pronouns the parser resolved included), which are written by
name (for ``answer_kind``), which events happen where and with whom, each document's length and
chapter headings. ``build_table`` reads it from graph nodes; every signal of ``narrative``,
``anchor``, ``names`` and ``sections`` reads it, and none of them builds it, so it is a module
of its own (framework-free, like the rest of ``ranking``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Optional, Sequence

import numpy as np

from llama_index_e2rag.context.story_text import headings as find_headings
from llama_index_e2rag.ranking.answer_kind import name_kind
from llama_index_e2rag.ranking.sections import centroid_norms, section_ids
from llama_index_e2rag.schema import GraphNode, name_type, normalize_text

#: Entity types of mentions that are no character an anchor's region could follow: plain nouns
#: and the parser's (spaCy's) dates, times and numbers.
NOT_CHARACTERS = frozenset(
    {"concept", "DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
)

@dataclass
class PassageTable:
    """Passages of one index state in story order, with the graph read per passage."""

    ids: list[str]
    doc_of: np.ndarray
    vectors: np.ndarray
    #: normalised mention name -> sorted passage rows where it is mentioned
    names: dict[str, np.ndarray] = field(default_factory=dict)
    #: word of a name -> names containing it
    name_words: dict[str, set[str]] = field(default_factory=dict)
    #: predicate lemma -> [(passage row, participant names)]
    events: dict[str, list[tuple[int, frozenset[str]]]] = field(default_factory=dict)
    #: (document order, start offset) per row, for placing nodes by offset
    starts: list[tuple[int, int]] = field(default_factory=list)
    #: names of named entities (a parser's PERSON, ORG, …; an LLM's entities): the characters
    #: an anchor's region follows (a parser's plain nouns, "storm", "the road", are not, nor
    #: its dates, times and numbers: "that night" reappears everywhere and is nobody)
    named: set[str] = field(default_factory=set)
    #: answer kind -> mention name offering it -> rows where the name is written
    #: (``answer_kind``; a resolved pronoun's rows are not among them)
    typed: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: document order -> its length in characters (the end of its last passage)
    lengths: dict[int, int] = field(default_factory=dict)
    #: document order -> chapter-like headings (offset, "Chapter III") found in its passages
    headings: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    #: start offset per row (from ``starts``)
    offsets: np.ndarray = field(init=False, repr=False)
    #: per row, how many headings of its document come at or before it (0: none yet)
    chapters: np.ndarray = field(init=False, repr=False)
    #: question name -> ``match_names``' answer, read again by every signal of every question
    matches: dict[str, tuple[str, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    #: (section size, long_chars) -> (section per row, centroid norm per section), computed once
    _sections: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self.offsets = np.array([s for _, s in self.starts], dtype=np.int64)
        self.chapters = np.zeros(len(self.starts), dtype=np.int64)
        for row, (doc, offset) in enumerate(self.starts):
            heads = self.headings.get(doc)
            if heads:
                self.chapters[row] = bisect.bisect_right([o for o, _ in heads], offset)

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def event_participants(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Every event's passage row, and participant name -> indices of its events in that
        array: a question's co-participation is then read without visiting each event (read
        once ``events`` is filled; the table of an index state is never changed after)."""
        rows: list[int] = []
        by_participant: dict[str, list[int]] = {}
        for found in self.events.values():
            for row, who in found:
                for name in who:
                    by_participant.setdefault(name, []).append(len(rows))
                rows.append(row)
        return np.array(rows, dtype=np.int64), {
            name: np.array(found, dtype=np.int64) for name, found in by_participant.items()
        }

    def doc_length(self, doc_order: int) -> int:
        """The document's length in characters (0 when unknown)."""
        return self.lengths.get(doc_order, 0)

    def sections(self, size: int, long_chars: int) -> tuple[np.ndarray, np.ndarray]:
        """Blocks of ``size`` passages in each document longer than ``long_chars`` characters
        (-1 elsewhere) and their centroid norms (``sections``)."""
        key = (size, long_chars)
        if key not in self._sections:
            lengths = np.array([self.doc_length(int(d)) for d in self.doc_of], dtype=np.int64)
            ids = section_ids(self.doc_of, size, lengths > long_chars)
            self._sections[key] = (ids, centroid_norms(self.vectors, ids))
        return self._sections[key]

    @cached_property
    def row_names(self) -> list[list[str]]:
        """Per passage row, the mention names found there (``names`` inverted, read once), so
        a few rows' names are read without visiting every name of the story."""
        found: list[list[str]] = [[] for _ in self.ids]
        for name, rows in self.names.items():
            for row in rows.tolist():
                found[row].append(name)
        return found

    def names_at(self, first: int, last: int) -> tuple[str, ...]:
        """The mention names found in passages ``first`` to ``last`` (inclusive)."""
        rows = self.row_names[max(first, 0): last + 1]
        return tuple(sorted({name for names in rows for name in names}))

    def row_of(self, doc_order: int, offset: int) -> Optional[int]:
        """The passage holding character ``offset`` of the document with that order."""
        i = bisect.bisect_right(self.starts, (doc_order, offset)) - 1
        if i < 0 or self.starts[i][0] != doc_order:
            return None
        return i


def build_table(
    passages: Sequence[GraphNode],
    vectors: np.ndarray,
    mentions: Iterable[GraphNode],
    events: Iterable[GraphNode],
) -> PassageTable:
    """Read the graph per passage: mention occurrences and events placed by their offsets.

    ``passages`` must be in story order with ``vectors`` in the same order. A mention's
    occurrences are its ``attrs["spans"]`` (the parser records pronouns it resolved there too)
    or its ``span``; a node without offsets (LLM-extracted) is placed at its ``pos``.
    """
    lengths: dict[int, int] = {}
    heads: dict[int, list[tuple[int, str]]] = {}
    for p in passages:
        end = p.span[1] if p.span else p.pos[1] + len(p.text)
        lengths[p.pos[0]] = max(lengths.get(p.pos[0], 0), end)
        heads.setdefault(p.pos[0], []).extend(find_headings(p.text, p.span[0] if p.span else p.pos[1]))
    table = PassageTable(
        ids=[p.id for p in passages],
        doc_of=np.array([p.pos[0] for p in passages], dtype=np.int64),
        vectors=unit_rows(vectors),
        starts=[(p.pos[0], p.pos[1]) for p in passages],
        lengths=lengths,
        headings={doc: tuple(sorted(found)) for doc, found in heads.items() if found},
    )
    rows_by_name: dict[str, set[int]] = {}
    written: dict[str, tuple[str, set[int]]] = {}
    by_chunk: dict[str, list[int]] = {}
    for row, passage in enumerate(passages):
        by_chunk.setdefault(passage.chunk_id or "", []).append(row)
    normalised: dict[int, str] = {}

    def words_of(row: int) -> str:
        if row not in normalised:
            normalised[row] = f" {normalize_text(passages[row].text)} "
        return normalised[row]
    for mention in mentions:
        name = normalize_text(mention.name or mention.text)
        if not name:
            continue
        rows = {table.row_of(mention.pos[0], offset) for offset in _offsets(mention)}
        if not mention.attrs.get("spans"):  # LLM-extracted: every passage of its chunk naming it
            rows |= {r for r in by_chunk.get(mention.chunk_id or "", ()) if f" {name} " in words_of(r)}
        rows_by_name.setdefault(name, set()).update(r for r in rows if r is not None)
        entity_type = name_type(mention) if "entity_type" in mention.attrs else "named"
        if entity_type not in NOT_CHARACTERS:
            table.named.add(name)
        kind = name_kind(name, entity_type)
        if kind is not None:
            found = _written_rows(passages, table, mention, name) if mention.attrs.get(
                "spans") else {r for r in rows if r is not None}
            written.setdefault(name, (kind, set()))[1].update(found)
    table.names = {n: np.array(sorted(r), dtype=np.int64) for n, r in rows_by_name.items()}
    for n, (kind, found) in written.items():
        if found:
            table.typed.setdefault(kind, {})[n] = np.array(sorted(found), dtype=np.int64)
    table.name_words = name_words(table.names)
    for event in events:
        lemma = (event.attrs.get("lemma") or "").lower()
        offset = event.span[0] if event.span else event.pos[1]
        row = table.row_of(event.pos[0], offset)
        if not lemma or row is None:
            continue
        participants = frozenset(normalize_text(p) for p in event.attrs.get("participants", ()))
        table.events.setdefault(lemma, []).append((row, participants))
    return table


def _written_rows(
    passages: Sequence[GraphNode], table: PassageTable, mention: GraphNode, name: str
) -> set[int]:
    """Rows where the mention's own name is written (not a pronoun resolved to it; a person
    noun phrase's span holds its article or possessive: "the shepherd" writes "shepherd")."""
    rows = set()
    for start, end in mention.attrs["spans"]:
        row = table.row_of(mention.pos[0], int(start))
        if row is None:
            continue
        passage = passages[row]
        begin = passage.span[0] if passage.span else passage.pos[1]
        written = normalize_text(passage.text[int(start) - begin : int(end) - begin])
        if written == name or written.endswith(" " + name):
            rows.add(row)
    return rows


def _offsets(node: GraphNode) -> list[int]:
    spans = node.attrs.get("spans")
    if spans:
        return [int(s[0]) for s in spans]
    return [node.span[0]] if node.span else []


def name_words(names: Iterable[str]) -> dict[str, set[str]]:
    """Word of a name -> the names containing it (``PassageTable.name_words``)."""
    found: dict[str, set[str]] = {}
    for name in names:
        for word in name.split():
            found.setdefault(word, set()).add(name)
    return found


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as float32 rows of unit length (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.size == 0:
        return matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
