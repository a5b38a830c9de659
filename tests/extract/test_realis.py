"""``extract.realis`` on the real parser: which predicates are told as actually happening."""

from __future__ import annotations

from typing import Any

import pytest

from llama_index_e2rag.extract.frames import DocFrames
from llama_index_e2rag.extract.realis import quoted_tokens


@pytest.fixture(scope="module")
def nlp() -> Any:
    from llama_index_e2rag.extract.spacy_model import load_spacy

    return load_spacy()


def realis(nlp: Any, text: str) -> dict[str, bool]:
    """Verb text -> whether its frame is realis."""
    return {f.verb.text: f.realis for f in DocFrames(nlp(text), True).frames}


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("Tom did not open the door.", "open"),  # negated
        ("Tom would open the door.", "open"),  # modal
        ("Tom wanted to open the door.", "open"),  # infinitive complement
        ("If Tom opened the door, Mary left.", "opened"),  # condition
        ("Did Tom open the door?", "open"),  # question
        ("Tom knew the answer.", "knew"),  # a state
        ("“Tom opened the door,” said Mary.", "opened"),  # said, not told
    ],
)
def test_what_is_not_told_as_happening_is_not_realis(nlp: Any, text: str, verb: str) -> None:
    assert realis(nlp, text)[verb] is False


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("Tom opened the door.", "opened"),
        ("The letter was stolen by the King.", "stolen"),
        ("“Tom opened the door,” said Mary.", "said"),
    ],
)
def test_actions_the_story_tells_are_realis(nlp: Any, text: str, verb: str) -> None:
    assert realis(nlp, text)[verb] is True


def test_quotation_marks_of_every_style_open_and_close(nlp: Any) -> None:
    doc = nlp("He said “go” and 'stay' and \"run\" then ``wait'' too.")
    inside = {doc[i].text for i in quoted_tokens(doc)}
    # a straight single quote is an apostrophe as often as a quotation mark: not read as one
    assert inside == {"go", "run", "wait"}
    assert "said" not in inside and "then" not in inside
