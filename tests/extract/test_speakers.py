"""``extract.speakers`` on the real parser: inside quotation marks, "I" is the speaker and
"you" the one spoken to."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from llama_index_e2rag.extract.frames import DocFrames
from llama_index_e2rag.extract.pronouns import NARRATOR_NAME
from llama_index_e2rag.extract.spacy_model import load_spacy
from llama_index_e2rag.extract.speakers import quotes

pytestmark = pytest.mark.spacy


@pytest.fixture(scope="module")
def nlp() -> Any:
    return load_spacy()


def spoken(nlp: Any, text: str) -> list[tuple[str, str, int]]:
    """(pronoun, the name it stands for, its quote's number), for every quoted I/you read."""
    doc = nlp(text)
    starts = [q.start for q in quotes(doc)]
    refs = DocFrames(doc, resolve_pronouns=True).pronoun_refs()
    found = []
    for ref in refs:
        tok = doc[ref.anchor]
        number = sum(1 for s in starts if s <= tok.i) - 1
        if tok.lower_ in ("i", "me", "my", "you", "your") and number >= 0:
            inside = quotes(doc)[number]
            if inside.start <= tok.i < inside.end:
                found.append((tok.text, ref.name, number))
    return found


def reading(nlp: Any, text: str, word: str) -> Optional[str]:
    names = {name for pronoun, name, _ in spoken(nlp, text) if pronoun == word}
    assert len(names) <= 1, names
    return next(iter(names), None)


@pytest.mark.parametrize(
    "text",
    [
        "“I am tired,” said Margaret Hale.",
        "“I am tired,” Margaret Hale said.",
        "Margaret Hale came in. “I am tired,” she said.",
        "Margaret Hale said, “I am tired.”",
        "“Am I late?” cried Margaret Hale.",  # the small model reads the name as an object
        "Margaret Hale turned and said, “I am tired.”",
    ],
)
def test_an_attributed_quote_is_its_speakers(nlp: Any, text: str) -> None:
    assert reading(nlp, text, "I") == "Margaret Hale"


def test_the_narrators_own_speech_is_the_narrators(nlp: Any) -> None:
    assert reading(nlp, "“I am tired,” I said to Mr. Hale.", "I") == NARRATOR_NAME


def test_a_quote_interrupted_by_its_attribution_keeps_its_speaker(nlp: Any) -> None:
    text = "“I know,” said Anne Elliot, “but I cannot stay.”"
    assert {(p, n) for p, n, _ in spoken(nlp, text)} == {("I", "Anne Elliot")}
    assert {q for *_, q in spoken(nlp, text)} == {0, 1}


@pytest.mark.parametrize(
    ("text", "listener"),
    [
        ("“You must go,” said Mrs. Bennet to Mr. Bennet.", "Mr. Bennet"),
        ("“Mr. Bennet, you must go,” said Mrs. Bennet.", "Mr. Bennet"),
        ("“You must go, Mr. Bennet!” said Mrs. Bennet.", "Mr. Bennet"),
        ("Mrs. Bennet turned to Mr. Bennet and said, “You must go.”", "Mr. Bennet"),
    ],
)
def test_you_is_the_one_spoken_to(nlp: Any, text: str, listener: str) -> None:
    assert reading(nlp, text, "You" if "You" in text else "you") == listener


def test_speakers_take_turns_in_a_conversation(nlp: Any) -> None:
    text = ("“Where are you going?” Mr. Hale asked Margaret.\n“To London,” she answered.\n"
            "“Why?”\n“Because I must.”\n“Then I will come with you.”")
    found = spoken(nlp, text)
    assert ("you", "Margaret", 0) in found  # asked Margaret: she is spoken to
    assert ("I", "Margaret", 3) in found  # turns: Mr. Hale asks why, Margaret answers
    assert ("I", "Mr. Hale", 4) in found and ("you", "Margaret", 4) in found


def test_the_narration_just_before_an_unattributed_quote_gives_its_speaker(nlp: Any) -> None:
    assert reading(nlp, "Mr. Thornton sat down. Edith laughed. “I am always right.”", "I") \
        == "Edith"


@pytest.mark.parametrize(
    "text",
    [
        "“I am tired.” Mr. Hale said nothing about it to Margaret.",  # a new sentence
        "“I am tired,” said the wind.",  # a speaker who is nobody
        "“I am tired.”",  # nothing to tell
    ],
)
def test_no_speaker_no_reading(nlp: Any, text: str) -> None:
    assert reading(nlp, text, "I") is None


def test_every_style_of_quotation_mark_delimits_a_quote(nlp: Any) -> None:
    doc = nlp("He said “go” and \"run\" then ``wait'' and “never closed")
    assert [doc[q.start : q.end].text for q in quotes(doc)] == ["go", "run", "wait",
                                                                "never closed"]
