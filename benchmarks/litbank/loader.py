"""A LitBank folder as works: the text fed to a system, and gold mentions, chains and events in
character offsets of that text.

The text is the tokenised ``coref/<id>_brat.txt`` detokenised the simplest way: a sentence's
tokens joined by single spaces, sentences joined by newlines. Gold token positions (sentence,
token, end inclusive) become character offsets of that text, so a system's spans and the gold
ones are compared in one coordinate system.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from benchmarks.loaders import DEFAULT_DATA_ROOT

DEFAULT_LITBANK_ROOT = DEFAULT_DATA_ROOT / "litbank"
TYPES = ("PER", "FAC", "GPE", "LOC", "VEH", "ORG")
CATEGORIES = ("PROP", "NOM", "PRON")
_TEXT_SUFFIX, _ANN_SUFFIX, _EVENT_SUFFIX = "_brat.txt", "_brat.ann", "_brat.tsv"


class LitBankDataError(ValueError):
    """A LitBank folder or file that cannot be read as LitBank (the message names the file)."""


@dataclass(frozen=True)
class GoldMention:
    """One annotated mention: ``[start, end)`` characters, its tokens, type, category, chain."""

    start: int
    end: int
    first_token: int  # global token index
    last_token: int  # inclusive
    type: str
    category: str
    chain: str
    text: str


@dataclass(frozen=True)
class Work:
    """One LitBank work: the text a system reads and what annotators marked in it."""

    work_id: str
    text: str
    #: character ``(start, end)`` of every token, in order over the whole text
    tokens: tuple[tuple[int, int], ...]
    mentions: tuple[GoldMention, ...]
    #: global indices of the tokens marked EVENT
    events: frozenset[int]

    @property
    def words(self) -> int:
        return len(self.tokens)

    def token_at(self, char: int) -> int | None:
        """The index of the token containing character ``char`` (None: a space or outside)."""
        i = bisect.bisect_right(self._starts, char) - 1
        if i >= 0 and char < self.tokens[i][1]:
            return i
        return None

    @property
    def _starts(self) -> list[int]:
        cached = self.__dict__.get("_starts_cache")
        if cached is None:
            cached = [start for start, _ in self.tokens]
            object.__setattr__(self, "_starts_cache", cached)
        return cached


def work_ids(root: Path) -> list[str]:
    """The works of a folder, in sorted file order (the ids are the file names' stems)."""
    folder = root / "coref"
    if not folder.is_dir():
        raise LitBankDataError(f"not a LitBank folder: {root} has no coref/ folder")
    ids = sorted(p.name[: -len(_TEXT_SUFFIX)] for p in folder.glob(f"*{_TEXT_SUFFIX}"))
    if not ids:
        raise LitBankDataError(f"no works in {folder} (no *{_TEXT_SUFFIX} files)")
    return ids


def select(ids: Sequence[str], only: Sequence[str] = (), works: int | None = None) -> list[str]:
    """``only``: these works, each named by its id or the number it starts with ("1342");
    ``works``: the first N of the rest in file order."""
    chosen = list(ids)
    if only:
        chosen = []
        for wanted in only:
            hits = [i for i in ids if i == wanted or i.split("_", 1)[0] == wanted]
            if not hits:
                raise LitBankDataError(f"no work {wanted!r} (ids look like {ids[0]!r})")
            chosen += [h for h in hits if h not in chosen]
    return chosen[:works] if works is not None else chosen


def load_work(root: Path, work_id: str) -> Work:
    """One work with its gold annotations; any inconsistency names the file and line."""
    text_path = root / "coref" / f"{work_id}{_TEXT_SUFFIX}"
    sentences = [line.split(" ") for line in _read(text_path).split("\n")]
    while sentences and sentences[-1] == [""]:
        sentences.pop()
    tokens: list[tuple[int, int]] = []
    first_of: list[int] = []  # global index of each sentence's first token
    offset = 0
    for sentence in sentences:
        first_of.append(len(tokens))
        for token in sentence:
            tokens.append((offset, offset + len(token)))
            offset += len(token) + 1
    text = "\n".join(" ".join(sentence) for sentence in sentences)
    mentions = _mentions(root / "coref" / f"{work_id}{_ANN_SUFFIX}", text, tokens, first_of,
                         sentences)
    events = _events(root / "events" / f"{work_id}{_EVENT_SUFFIX}", sentences, first_of)
    return Work(work_id, text, tuple(tokens), tuple(mentions), events)


def load_litbank(root: Path = DEFAULT_LITBANK_ROOT, only: Sequence[str] = (),
                 works: int | None = None) -> list[Work]:
    """The chosen works of a LitBank folder (``select``), loaded."""
    return [load_work(root, work_id) for work_id in select(work_ids(root), only, works)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LitBankDataError(f"missing file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LitBankDataError(f"cannot read {path}: {exc}") from None


def _mentions(path: Path, text: str, tokens: list[tuple[int, int]], first_of: list[int],
              sentences: list[list[str]]) -> list[GoldMention]:
    rows: dict[str, tuple[int, int, str, str, str]] = {}
    chains: dict[str, str] = {}
    for number, line in enumerate(_read(path).splitlines(), 1):
        cells = line.split("\t")
        where = f"{path}:{number}"
        if cells[0] == "MENTION":
            if len(cells) != 9:
                raise LitBankDataError(f"{where}: a MENTION row has 9 tab-separated cells")
            _, tid, s1, t1, s2, t2, _surface, kind, category = cells
            try:
                first = _token(first_of, sentences, int(s1), int(t1))
                last = _token(first_of, sentences, int(s2), int(t2))
            except (ValueError, IndexError):
                raise LitBankDataError(f"{where}: token position outside the text") from None
            if kind not in TYPES or category not in CATEGORIES or last < first:
                raise LitBankDataError(f"{where}: unknown type/category or reversed span")
            rows[tid] = (first, last, kind, category, where)
        elif cells[0] == "COREF":
            if len(cells) != 3:
                raise LitBankDataError(f"{where}: a COREF row has 3 tab-separated cells")
            chains[cells[1]] = cells[2]
        elif cells[0] not in ("APPOS", "COP", ""):
            raise LitBankDataError(f"{where}: unknown row kind {cells[0]!r}")
    unknown = sorted(set(chains) - set(rows))
    if unknown:
        raise LitBankDataError(f"{path}: COREF rows name no MENTION: {', '.join(unknown[:5])}")
    out = []
    for tid, (first, last, kind, category, _) in rows.items():
        start, end = tokens[first][0], tokens[last][1]
        # a mention no COREF row names is an entity of its own
        chain = chains.get(tid, f"singleton:{tid}")
        out.append(GoldMention(start, end, first, last, kind, category, chain, text[start:end]))
    return sorted(out, key=lambda m: (m.start, -m.end))


def _token(first_of: list[int], sentences: list[list[str]], sentence: int, token: int) -> int:
    if sentence < 0 or not 0 <= token < len(sentences[sentence]):
        raise IndexError(token)
    return first_of[sentence] + token


def _events(path: Path, sentences: list[list[str]], first_of: list[int]) -> frozenset[int]:
    """EVENT tokens; the file's tokens must be the text's, sentence by sentence."""
    blocks: list[list[list[str]]] = [[]]
    for line in _read(path).splitlines():
        if line.strip():
            blocks[-1].append(line.split("\t"))
        elif blocks[-1]:
            blocks.append([])
    if not blocks[-1]:
        blocks.pop()
    if len(blocks) != len(sentences):
        raise LitBankDataError(
            f"{path}: {len(blocks)} sentences, the text has {len(sentences)}")
    events = set()
    for number, (block, sentence) in enumerate(zip(blocks, sentences)):
        if [row[0] for row in block] != sentence:
            raise LitBankDataError(f"{path}: sentence {number + 1} has other tokens than the text")
        for i, row in enumerate(block):
            label = row[1] if len(row) > 1 else ""
            if label not in ("EVENT", "O"):
                raise LitBankDataError(f"{path}: sentence {number + 1}: label {label!r}")
            if label == "EVENT":
                events.add(first_of[number] + i)
    return frozenset(events)
