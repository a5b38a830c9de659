"""Dataset loaders for the shared evaluation data (LiteraryQA, FairytaleQA, multi-hop samples).

Everything is read from the data root laid out as in ``shared/data/README.md``; the loaders only
parse, they never filter questions by content, so every system sees the same question set.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Default data root: ``../shared/data`` next to the repository checkout.
DEFAULT_DATA_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_START_MARKERS = (
    re.compile(r"^\*\*\* ?START OF.*$", re.MULTILINE | re.IGNORECASE),
    re.compile(r"^\*END\*THE SMALL PRINT.*$", re.MULTILINE | re.IGNORECASE),
)
_END_MARKERS = (
    re.compile(r"^\*\*\* ?END OF", re.MULTILINE | re.IGNORECASE),
    re.compile(r"^End of (the )?Project Gutenberg", re.MULTILINE | re.IGNORECASE),
)


@dataclass
class Question:
    """One question with its reference answers and (when the dataset has them) gold evidence."""

    qid: str
    question: str
    answers: list[str]
    gold_sections: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)


@dataclass
class Narrative:
    """A source text (book or story) and the questions asked about it."""

    doc_id: str
    title: str
    text: str
    questions: list[Question]
    sections: dict[int, str] = field(default_factory=dict)

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class MultiHopItem:
    """A multi-hop question over its closed set of paragraphs (one paragraph = one document)."""

    qid: str
    question: str
    answers: list[str]
    paragraphs: list[tuple[str, str]]
    gold_units: list[str]
    unit: str  # "sentence" or "paragraph"


def strip_gutenberg(raw: str) -> str:
    """The body of a Project Gutenberg file: header/footer removed, CRLF normalised to LF."""
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    start = 0
    for marker in _START_MARKERS:
        match = marker.search(text)
        if match:
            start = match.end()
            break
    end = len(text)
    for marker in _END_MARKERS:
        match = marker.search(text, start)
        if match and match.start() < end:
            end = match.start()
    return text[start:end].strip()


def load_literaryqa(data_root: Path = DEFAULT_DATA_ROOT) -> list[Narrative]:
    """LiteraryQA validation books, header/footer stripped, questions joined by gutenberg_id."""
    folder = Path(data_root) / "literaryqa"
    books = {path.name.split("_", 1)[0][2:]: path for path in (folder / "books").glob("pg*.txt")}
    narratives = []
    with open(folder / "validation.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            gid = str(record["gutenberg_id"])
            if gid not in books:
                raise FileNotFoundError(f"LiteraryQA book pg{gid}_*.txt missing under {folder}")
            raw = books[gid].read_bytes().decode("utf-8")
            questions = [
                Question(qid=f"lqa-{gid}-{i}", question=qa["question"], answers=list(qa["answers"]))
                for i, qa in enumerate(record["qas"])
            ]
            narratives.append(
                Narrative(doc_id=f"pg{gid}", title=record["title"], text=strip_gutenberg(raw),
                          questions=questions)
            )
    return narratives


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def _section_numbers(value: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", value or "")]


def load_fairytaleqa(data_root: Path = DEFAULT_DATA_ROOT, split: str = "val") -> list[Narrative]:
    """FairytaleQA stories of one split: text = sections in order, questions with gold sections.

    References are the two annotators' gold answers (``answer1``, ``answer4``; the other answer
    columns are alternatives some annotators added, which the README's reference figures do not
    count); attributes are ``attribute1`` and, when present, ``attribute2``.
    """
    folder = Path(data_root) / "fairytaleqa"
    narratives = []
    for story_path in sorted((folder / "stories" / split).glob("*-story.csv")):
        name = story_path.name[: -len("-story.csv")]
        sections = {int(row["section"]): row["text"].strip() for row in _read_csv(story_path)}
        question_path = folder / "questions" / split / f"{name}-questions.csv"
        questions = []
        for row in _read_csv(question_path):
            gold = [sections[n] for n in _section_numbers(row["cor_section"]) if n in sections]
            answers = [row.get(key, "").strip() for key in ("answer1", "answer4")]
            attributes = [row[key].strip() for key in ("attribute1", "attribute2") if row.get(key)]
            questions.append(
                Question(qid=f"ftqa-{name}-{row['question_id']}", question=row["question"],
                         answers=[a for a in answers if a], gold_sections=gold,
                         attributes=[a for a in attributes if a])
            )
        text = "\n\n".join(sections[n] for n in sorted(sections))
        narratives.append(Narrative(doc_id=name, title=name.replace("-", " "), text=text,
                                    questions=questions, sections=sections))
    return narratives


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _sentence_items(path: Path, dataset: str) -> list[MultiHopItem]:
    """HotpotQA / 2Wiki: gold = the supporting sentences ([title, sentence index])."""
    items = []
    for record in _jsonl(path):
        context = {title: sentences for title, sentences in record["context"]}
        gold = [context[t][i].strip() for t, i in record["supporting_facts"]
                if t in context and 0 <= i < len(context[t])]
        paragraphs = [(title, " ".join(s.strip() for s in sentences).strip())
                      for title, sentences in record["context"]]
        items.append(MultiHopItem(qid=f"{dataset}-{record['_id']}", question=record["question"],
                                  answers=[str(record["answer"])], paragraphs=paragraphs,
                                  gold_units=gold, unit="sentence"))
    return items


def load_multihop(data_root: Path = DEFAULT_DATA_ROOT) -> dict[str, list[MultiHopItem]]:
    """The three multi-hop samples, keyed ``hotpotqa``, ``2wiki``, ``musique``."""
    folder = Path(data_root) / "multihop"
    musique = []
    for record in _jsonl(folder / "musique_dev.jsonl"):
        paragraphs = [(p["title"], p["paragraph_text"].strip()) for p in record["paragraphs"]]
        gold = [p["paragraph_text"].strip() for p in record["paragraphs"] if p["is_supporting"]]
        musique.append(MultiHopItem(
            qid=f"musique-{record['id']}", question=record["question"],
            answers=[str(record["answer"]), *map(str, record.get("answer_aliases", []))],
            paragraphs=paragraphs, gold_units=gold, unit="paragraph"))
    return {
        "hotpotqa": _sentence_items(folder / "hotpotqa_dev.jsonl", "hotpotqa"),
        "2wiki": _sentence_items(folder / "2wikimultihopqa_dev.jsonl", "2wiki"),
        "musique": musique,
    }


def word_windows(narratives: list[Narrative], n_words: int, docs: int) -> list[str]:
    """``docs`` distinct documents of ``n_words // docs`` words each, layout kept: windows of the
    books concatenated (read round and round when they hold fewer words than asked) that start
    ``1/docs`` of the way apart, so no two texts are the same (the index skips a repeated text).
    """
    text = "\n\n".join(narrative.text for narrative in narratives)
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    size = n_words // docs
    if not spans or size < 1:
        raise ValueError(f"cannot cut {docs} documents of {n_words} words from {len(spans)} words")
    step = max(1, len(spans) // docs)
    windows = []
    for i in range(docs):
        first = (i * step) % len(spans)
        pieces, left = [], size
        while left > 0:
            last = min(len(spans), first + left) - 1
            pieces.append(text[spans[first][0] : spans[last][1]])
            left -= last - first + 1
            first = 0
        windows.append("\n\n".join(pieces))
    return windows


def concatenated_words(narratives: list[Narrative], n_words: int) -> str:
    """The first ``n_words`` words of the given books concatenated, layout kept (scaling runs)."""
    text = "\n\n".join(narrative.text for narrative in narratives)
    for count, match in enumerate(re.finditer(r"\S+", text), start=1):
        if count == n_words:
            return text[: match.end()]
    raise ValueError(f"only {len(text.split())} words available, {n_words} requested")
