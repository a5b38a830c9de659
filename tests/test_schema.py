"""``schema.normalize_text``: the key of ids and name matching, which stored ids depend on."""

from __future__ import annotations

import random
import unicodedata

from llama_index_e2rag.schema import normalize_text


def _reference(text: str) -> str:
    """The per-character definition the fast version must equal."""
    import re

    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return re.sub(r"\s+", " ", text).strip()


def test_normalize_text_equals_the_per_character_definition() -> None:
    rng = random.Random(7)
    alphabet = list("abcXYZ 09.,;'\"-\n\t") + list("éÉçñøÅßĳﬁ“”’…—") + [
        "\u0301", "\u0308", "\u20dd", "\u3042", "\u0663", "\u00a0", "\u2003", "Ω", "İ",
    ]
    samples = ["", "   ", "Émile Zola", "Mr. Darcy’s", "naïve café", "\u0301alone"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
                for _ in range(3000)]
    for text in samples:
        assert normalize_text(text) == _reference(text), repr(text)


def test_normalize_text_strips_accents_case_and_punctuation() -> None:
    assert normalize_text("  Émile   ZOLA, naïve!  ") == "emile zola naive"
