"""A tiny folder laid out like LitBank: one work of four sentences with a Holmes chain of six
mentions, a FAC mention without a COREF row, and five event tokens."""

from __future__ import annotations

from pathlib import Path

TINY_ID = "901_the_lodger"
TINY_SENTENCES = [
    "Mr. Holmes opened the door of the old house .",
    "He walked to London with Mrs. Hudson .",
    "“ Holmes , ” she said , “ you are late . ”",
    "Holmes smiled and lit his pipe .",
]
#: (tid, sentence, first token, last token, type, category, chain or None)
TINY_MENTIONS = [
    ("T1", 0, 0, 1, "PER", "PROP", "holmes"),
    ("T2", 0, 6, 8, "FAC", "NOM", None),
    ("T3", 1, 0, 0, "PER", "PRON", "holmes"),
    ("T4", 1, 3, 3, "GPE", "PROP", "london"),
    ("T5", 1, 5, 6, "PER", "PROP", "hudson"),
    ("T6", 2, 1, 1, "PER", "PROP", "holmes"),
    ("T7", 2, 4, 4, "PER", "PRON", "hudson"),
    ("T8", 2, 8, 8, "PER", "PRON", "holmes"),
    ("T9", 3, 0, 0, "PER", "PROP", "holmes"),
    ("T10", 3, 4, 4, "PER", "PRON", "holmes"),
]
TINY_EVENTS = {"opened", "walked", "said", "smiled", "lit"}


def write_tiny_litbank(root: Path) -> Path:
    """``root`` with coref/<id>_brat.{txt,ann} and events/<id>_brat.tsv of the tiny work."""
    (root / "coref").mkdir(parents=True)
    (root / "events").mkdir()
    (root / "coref" / f"{TINY_ID}_brat.txt").write_text("\n".join(TINY_SENTENCES) + "\n",
                                                        encoding="utf-8")
    tokens = [s.split(" ") for s in TINY_SENTENCES]
    rows = []
    for tid, sentence, first, last, kind, category, _ in TINY_MENTIONS:
        surface = " ".join(tokens[sentence][first:last + 1])
        rows.append(f"MENTION\t{tid}\t{sentence}\t{first}\t{sentence}\t{last}\t{surface}\t"
                    f"{kind}\t{category}")
    rows += [f"COREF\t{tid}\t{chain}" for tid, *_, chain in TINY_MENTIONS if chain]
    rows.append("APPOS\tT1\tT3")
    (root / "coref" / f"{TINY_ID}_brat.ann").write_text("\n".join(rows) + "\n", encoding="utf-8")
    blocks = ["\n".join(f"{t}\t{'EVENT' if t in TINY_EVENTS else 'O'}" for t in sentence)
              for sentence in tokens]
    (root / "events" / f"{TINY_ID}_brat.tsv").write_text("\n\n".join(blocks) + "\n",
                                                         encoding="utf-8")
    return root
