"""The LitBank loader: gold token positions become character offsets of the detokenised text,
chains and events read right, any inconsistency named by file; the real folder when present."""

from __future__ import annotations

import pytest

from benchmarks.litbank.loader import (
    LitBankDataError,
    load_litbank,
    load_work,
    select,
    work_ids,
)

from litbank_tiny import TINY_EVENTS, TINY_ID, TINY_MENTIONS, TINY_SENTENCES


def test_text_is_tokens_joined_by_spaces_and_sentences_by_newlines(tiny_litbank):
    work = load_work(tiny_litbank, TINY_ID)
    assert work.text == "\n".join(TINY_SENTENCES)
    assert work.words == sum(len(s.split(" ")) for s in TINY_SENTENCES)
    assert [work.text[a:b] for a, b in work.tokens] == " ".join(TINY_SENTENCES).split(" ")


def test_mentions_are_character_spans_of_their_tokens(tiny_litbank):
    work = load_work(tiny_litbank, TINY_ID)
    sentences = [s.split(" ") for s in TINY_SENTENCES]
    expected = sorted(" ".join(sentences[s][a:b + 1]) for _, s, a, b, *_ in TINY_MENTIONS)
    assert sorted(work.text[m.start:m.end] for m in work.mentions) == expected
    assert all(m.text == work.text[m.start:m.end] for m in work.mentions)
    assert all(work.token_at(m.start) == m.first_token for m in work.mentions)
    holmes = [m.text for m in work.mentions if m.chain == "holmes"]
    assert holmes == ["Mr. Holmes", "He", "Holmes", "you", "Holmes", "his"]  # text order
    # a mention no COREF row names is an entity of its own
    house = next(m for m in work.mentions if m.text == "the old house")
    assert house.chain not in {m.chain for m in work.mentions if m is not house}


def test_events_are_the_tokens_marked_event(tiny_litbank):
    work = load_work(tiny_litbank, TINY_ID)
    assert {work.text[work.tokens[i][0]:work.tokens[i][1]] for i in work.events} == TINY_EVENTS
    assert work.token_at(work.text.index("walked") + 2) in work.events
    assert work.token_at(work.text.index(" walked")) is None  # the space before it


def test_select_by_id_or_leading_number_then_first_n(tiny_litbank):
    ids = ["1023_bleak_house", "1342_pride", "145_middlemarch"]
    assert select(ids, ["1342"]) == ["1342_pride"]
    assert select(ids, ["145_middlemarch", "1023"]) == ["145_middlemarch", "1023_bleak_house"]
    assert select(ids, works=2) == ids[:2]
    with pytest.raises(LitBankDataError, match="no work '99'"):
        select(ids, ["99"])
    assert [w.work_id for w in load_litbank(tiny_litbank, ["901"])] == [TINY_ID]


@pytest.mark.parametrize("damage,message", [
    (lambda root: (root / "events" / f"{TINY_ID}_brat.tsv").unlink(), "missing file"),
    (lambda root: (root / "events" / f"{TINY_ID}_brat.tsv").write_text("Mr.\tO\n"),
     "1 sentences, the text has 4"),
    (lambda root: _append(root, "MENTION\tT99\t7\t0\t7\t0\tx\tPER\tPROP"), "outside the text"),
    (lambda root: _append(root, "MENTION\tT99\t0\t0\t0\t0\tMr.\tANIMAL\tPROP"), "unknown type"),
    (lambda root: _append(root, "COREF\tT77\tnobody"), "name no MENTION: T77"),
    (lambda root: _append(root, "RELATION\tT1\tT3"), "unknown row kind"),
])
def test_damaged_files_are_named(tiny_litbank, damage, message):
    damage(tiny_litbank)
    with pytest.raises(LitBankDataError, match=message):
        load_work(tiny_litbank, TINY_ID)


def _append(root, line):
    path = root / "coref" / f"{TINY_ID}_brat.ann"
    path.write_text(path.read_text() + line + "\n")


def test_a_folder_without_works_is_refused(tmp_path):
    with pytest.raises(LitBankDataError, match="no coref/ folder"):
        work_ids(tmp_path)
    (tmp_path / "coref").mkdir()
    with pytest.raises(LitBankDataError, match="no works"):
        work_ids(tmp_path)


def test_real_litbank_mentions_match_their_annotated_text(shared_data):
    root = shared_data / "litbank"
    if not root.is_dir():
        pytest.skip(f"no LitBank folder at {root}")
    for work_id in work_ids(root):
        work = load_work(root, work_id)
        rows = [line.split("\t") for line in
                (root / "coref" / f"{work_id}_brat.ann").read_text().splitlines()]
        surfaces = sorted(r[6] for r in rows if r[0] == "MENTION")
        assert sorted(m.text for m in work.mentions) == surfaces, work_id
        assert work.events and all(0 <= i < work.words for i in work.events)
