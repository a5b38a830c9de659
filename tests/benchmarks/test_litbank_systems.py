"""The systems LitBank scores: the baselines' rules on a real spaCy parse, the project adapter
on a real offline build (MiniLM, spaCy, the entity layer), and a work scored end to end."""

from __future__ import annotations

import pytest

from benchmarks.litbank.evaluate import evaluate_work
from benchmarks.litbank.loader import load_work
from benchmarks.litbank.systems import (
    Prediction,
    every_verb,
    exact_names,
    names_and_pronouns,
    project,
    spacy_ner,
)
from llama_index_e2rag.extract.spacy_model import load_spacy

from litbank_tiny import TINY_ID

TEXT = "Mrs. Smith met Mr. Brown in the garden .\nShe smiled at him and he was happy ."


@pytest.fixture(scope="module")
def doc():
    return load_spacy()(TEXT)


def _chains(prediction):
    return {TEXT[m.start:m.end]: m.chain for m in prediction.mentions}


def test_pronouns_join_the_nearest_earlier_name_of_their_gender(doc):
    chains = _chains(names_and_pronouns(TEXT, doc))
    assert chains["She"] == chains["Smith"]  # past the nearer "Mr. Brown"
    assert chains["him"] == chains["he"] == chains["Brown"]
    assert chains["Smith"] != chains["Brown"]


def test_ner_baselines_differ_only_in_links(doc):
    alone, named = spacy_ner(TEXT, doc), exact_names(TEXT, doc)
    assert [(m.start, m.end, m.type) for m in alone.mentions] == [
        (m.start, m.end, m.type) for m in named.mentions]
    assert all(m.chain is None for m in alone.mentions)
    assert alone.events is None and named.events is None


def test_every_verb_takes_verbs_not_auxiliaries(doc):
    triggers = {TEXT[a:b] for a, b in every_verb(TEXT, doc).events}
    assert {"met", "smiled"} <= triggers and "was" not in triggers


def test_project_reads_back_spans_chains_events_and_timeline_names(tiny_litbank):
    work = load_work(tiny_litbank, TINY_ID)
    prediction = project(work.text)
    assert prediction.mentions and prediction.events
    for m in prediction.mentions:
        assert 0 <= m.start < m.end <= len(work.text) and m.chain
    assert {work.text[a:b] for a, b in prediction.events} <= set(work.text.split())
    spans = prediction.resolve("Holmes")
    # the entity's mentions are predicted mentions, one chain, the name among them
    chains = {m.chain for m in prediction.mentions if (m.start, m.end) in set(spans)}
    assert len(chains) == 1 and "Holmes" in {work.text[a:b] for a, b in spans}
    assert prediction.resolve("Zebediah Quartermaine") is None


def test_a_work_scores_every_part_a_system_predicts(tiny_litbank):
    work = load_work(tiny_litbank, TINY_ID)
    doc = load_spacy()(work.text)
    gold_events = [(work.tokens[i][0], work.tokens[i][1]) for i in work.events]
    perfect = evaluate_work(work, doc, Prediction(events=gold_events))
    assert perfect.events.prf()["f1"] == 1 and not perfect.mentions
    scores = evaluate_work(work, doc, names_and_pronouns(work.text, doc)).summary()
    assert set(scores) >= {"mentions", "coref"} and "events" not in scores
    head, exact = scores["mentions"]["head"]["overall"], scores["mentions"]["exact"]["overall"]
    assert head["gold"] == len(work.mentions) and head["tp"] >= exact["tp"]
