"""Answer types: what a question asks for, and which parsed sentences offer it (real spaCy)."""

from __future__ import annotations

import pytest

from llama_index_e2rag.ranking.answer_types import (
    AnswerType, answer_type, content_lemmas, offers, parse)


@pytest.mark.parametrize(
    "question, kind",
    [
        ("Who helped Peter when he was caught in the net?", AnswerType.PERSON),
        ("Whose house did the giant visit?", AnswerType.PERSON),
        ("Where did Peter lose his shoes?", AnswerType.PLACE),
        ("When did the king send for his daughter?", AnswerType.TIME),
        ("At what time did the bells ring?", AnswerType.TIME),
        ("Why did the farmer go to town?", AnswerType.CAUSE),
        ("What made the girl cry?", AnswerType.CAUSE),
        ("How come the fox ran away?", AnswerType.CAUSE),
        # The first wh-word decides: a "when" clause inside a what-question is context.
        ("What did Peter do when he saw the cat?", AnswerType.OTHER),
        ("How did the boy escape?", AnswerType.OTHER),
        ("Tell me about the garden.", AnswerType.OTHER),
    ],
)
def test_answer_type_is_read_at_the_first_wh_word(question, kind):
    assert answer_type(question) is kind


@pytest.mark.parametrize(
    "sentence, kind",
    [
        ("The old woman gave him a loaf of bread.", AnswerType.PERSON),
        ("Mr. McGregor came up with a sieve.", AnswerType.PERSON),
        ("His sobs were overheard by some sparrows, who flew to him.", AnswerType.PERSON),
        ("He lost one of his shoes among the cabbages.", AnswerType.PLACE),
        ("Peter lost one of his shoes under the gooseberry bush.", AnswerType.PLACE),
        ("They sailed to Norway.", AnswerType.PLACE),
        ("He went to Kunlun Mountain to visit the Queen.", AnswerType.PLACE),
        ("He stayed at home.", AnswerType.PLACE),
        ("The next morning he set out.", AnswerType.TIME),
        ("After he had eaten, he fell asleep.", AnswerType.TIME),
        ("When the sun rose, the king sent for his daughter.", AnswerType.TIME),
        ("He ran away because he was afraid.", AnswerType.CAUSE),
        ("She hid the key so that nobody could find it.", AnswerType.CAUSE),
        ("He went to the well to fetch water.", AnswerType.CAUSE),
    ],
)
def test_a_sentence_offers_the_kind_it_names(nlp, sentence, kind):
    (doc,) = parse(nlp, [sentence])
    assert offers(doc, kind, set())
    assert not offers(doc, AnswerType.OTHER, set())  # "what"/"how" want no particular kind


@pytest.mark.parametrize(
    "sentence, kind",
    [
        ("It was the second pair of shoes that he had lost in a fortnight.", AnswerType.PLACE),
        ("He was in great excitement.", AnswerType.PLACE),
        ("She gave the ring to the king.", AnswerType.PLACE),
        ("She gave the ring to John.", AnswerType.PLACE),
        ("He got caught by the large buttons on his jacket.", AnswerType.PERSON),
        ("The stone was heavy and grey.", AnswerType.TIME),
        ("He ate some lettuces and then some radishes.", AnswerType.CAUSE),
    ],
)
def test_a_sentence_without_the_kind_does_not_offer_it(nlp, sentence, kind):
    (doc,) = parse(nlp, [sentence])
    assert not offers(doc, kind, set())


def test_what_the_question_already_names_is_no_answer(nlp):
    """Who helped Peter? Not Peter. Where did he go after the garden? Not the garden."""
    question, sentence = parse(
        nlp, ["Who helped Mr. McGregor in the garden?", "Mr. McGregor worked in the garden."]
    )
    wanted = content_lemmas(question)
    assert {"mcgregor", "garden", "help"} <= wanted
    assert not offers(sentence, AnswerType.PERSON, wanted)
    assert not offers(sentence, AnswerType.PLACE, wanted)
    assert offers(sentence, AnswerType.PLACE, set())  # the place itself is seen


def test_content_lemmas_drop_stop_words_and_keep_base_forms(nlp):
    (doc,) = parse(nlp, ["Where did Peter lose his shoes?"])
    assert content_lemmas(doc) == {"peter", "lose", "shoe"}
