"""ranking.anchor: the anchor's confidence and its region in story terms (pure, synthetic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llama_index_e2rag.ranking.anchor import (
    MAX_CONFIDENCE,
    NEAR,
    anchor_metadata,
    confidence,
    describe,
    find_anchor,
    margins,
    region_bonus,
    side_cost,
    unit_anchor,
    wrong_side,
)
from llama_index_e2rag.ranking.passages import build_table
from llama_index_e2rag.schema import GraphNode, NodeKind

LEN = 100
SURE = (0.0, 1.0, 0.0)  # confidence = sigmoid(margin)


def _table(n: int, chapters_at=(), characters=None, types=None):
    """``n`` passages of one document, ``CHAPTER`` headings opening the given rows, and
    ``characters`` = {name: rows} (named entities; PERSON unless ``types`` says otherwise)."""
    passages = []
    for i in range(n):
        text = (f"CHAPTER {i}.\nSome words." if i in chapters_at else "Some words here.")
        passages.append(GraphNode(id=f"p{i}", kind=NodeKind.PASSAGE, text=text, doc_id="d",
                                  pos=(0, i * LEN, 3), span=(i * LEN, (i + 1) * LEN)))
    mentions = []
    for name, rows in (characters or {}).items():
        node = GraphNode(id=f"m-{name}", kind=NodeKind.MENTION, text=name, name=name,
                         doc_id="d", pos=(0, rows[0] * LEN, 0))
        node.attrs["spans"] = [[r * LEN + 1, r * LEN + 5] for r in rows]
        node.attrs["entity_type"] = (types or {}).get(name, "PERSON")
        mentions.append(node)
    return build_table(passages, np.eye(n, 4, dtype=np.float32) + 0.1, mentions, [])


def _peak(n: int, row: int, value: float = 10.0) -> np.ndarray:
    score = np.zeros(n, dtype=np.float32)
    score[row] = value
    return score


def test_the_region_is_a_share_of_the_story_not_a_count_of_passages():
    short, long = _table(20), _table(200)
    b_short, _ = region_bonus(short, 5, "after", 0.05, 0.0)
    b_long, _ = region_bonus(long, 50, "after", 0.05, 0.0)
    # ten passages on: half the short story, a twentieth of the long one
    assert b_long[60] > 2 * b_short[15]
    # the same share of the story gets the same bonus
    assert b_long[50 + 30] == pytest.approx(b_short[5 + 3], abs=1e-6)
    assert b_short[6] > b_short[7] > b_short[19] > 0 and not b_short[:5].any()


def test_past_a_chapter_heading_only_the_anchors_characters_stay_in_the_region():
    table = _table(40, chapters_at=(0, 10),
                   characters={"Margaret Hale": [2, 4, 5, 30], "Margaret": [35]})
    bonus, who = region_bonus(table, 5, "after", 0.05, 0.0, follow=0.3)
    assert who == ("margaret hale",)
    assert bonus[9] > 0.3  # the rest of the anchor's chapter
    assert not bonus[[11, 20, 29, 31]].any()  # later chapters without her
    # her later scenes, chapters later, under any of her names: at least anchor_follow
    assert bonus[30] == pytest.approx(0.3) and bonus[35] == pytest.approx(0.3)
    assert bonus[2] == 0  # her earlier scene is not where "after" points
    before, _ = region_bonus(table, 5, "before", 0.05, 0.0, follow=0.3)
    assert before[2] > 0 and not before[[30, 35]].any()
    during, _ = region_bonus(table, 5, "during", 0.05, 0.0, follow=0.3)
    assert not during[[30, 35]].any()  # "during" points at the moment itself


def test_a_reappearance_keeps_anchor_follow_however_far_and_nothing_more():
    rows = list(range(0, 100, 2))  # she is in every other passage
    table = _table(100, characters={"Dixon": rows})
    base, _ = region_bonus(_table(100), 10, "after", 0.05, 0.0)
    bonus, _ = region_bonus(table, 10, "after", 0.05, 0.0, follow=0.2)
    assert bonus[12] == pytest.approx(base[12])  # near: the share of the story decides
    assert bonus[90] == pytest.approx(0.2) and base[90] < 0.2
    assert bonus[91] == pytest.approx(base[91])  # a passage without her: the share alone
    off, _ = region_bonus(table, 10, "after", 0.05, 0.0, follow=0.0)
    assert off == pytest.approx(base)


def test_dates_and_times_are_no_characters_to_follow():
    table = _table(40, characters={"Dixon": [5, 30], "that night": [5, 20]},
                   types={"that night": "TIME"})
    bonus, who = region_bonus(table, 5, "after", 0.05, 0.0, follow=0.3)
    assert who == ("dixon",)
    assert bonus[30] == pytest.approx(0.3) and bonus[20] < 0.3


def test_during_rewards_both_sides_and_the_anchor_most():
    bonus, _ = region_bonus(_table(30), 10, "during", 0.05, 0.0)
    assert bonus[10] == 1.0 and bonus[9] == pytest.approx(bonus[11]) and bonus[9] < 1.0


def test_margin_is_over_the_best_rival_elsewhere_and_near_passages_are_no_rivals():
    table = _table(30)
    score = _peak(30, 10)
    score[10 + NEAR] = 9.5  # the same moment, restated
    margin, peak = margins(table, score, 10)
    assert margin == pytest.approx(10.0) and peak == pytest.approx(10.0 - score.mean())
    score[25] = 9.0  # another place in the story matching almost as well
    assert margins(table, score, 10)[0] == pytest.approx(1.0)


def test_confidence_is_the_fitted_logistic_curve():
    assert confidence(0.0, 0.0, SURE) == pytest.approx(0.5)
    assert confidence(3.0, 0.0, SURE) > confidence(1.0, 0.0, SURE)
    assert confidence(0.0, 2.0, (-1.0, 0.0, 0.5)) == pytest.approx(0.5)


def test_an_unsure_anchor_is_reported_but_gives_no_bonus_and_costs_nothing():
    table = _table(30)
    score = _peak(30, 10, 3.0)
    score[25] = 3.0
    weak = find_anchor(table, score, "after", SURE, 0.6, 0.05, 0.0)
    assert weak is not None and not weak.used and weak.confidence == pytest.approx(0.5)
    assert not weak.bonus.any() and not wrong_side(table, weak).any()
    strong = find_anchor(table, _peak(30, 10), "after", SURE, 0.6, 0.05, 0.0)
    assert strong.used and strong.bonus[11] > 0
    cost = pytest.approx(side_cost(strong.confidence))
    assert wrong_side(table, strong).tolist() == [cost] * 10 + [0.0] * 20
    before = find_anchor(table, _peak(30, 10), "before", SURE, 0.6, 0.05, 0.0)
    assert wrong_side(table, before).tolist() == [0.0] * 11 + [cost] * 19


def test_the_other_side_pays_more_the_surer_the_anchor():
    table = _table(30)
    costs = []
    for height in (2.0, 4.0, 8.0, 40.0):
        anchor = find_anchor(table, _peak(30, 10, height), "after", SURE, 0.0, 0.05, 0.0)
        costs.append(float(wrong_side(table, anchor)[0]))
    assert costs == sorted(costs) and costs[0] < costs[-1]
    assert side_cost(0.5) == pytest.approx(math.log(2.0))
    assert side_cost(1.0) == side_cost(MAX_CONFIDENCE) < math.inf


def test_chunks_read_the_region_through_their_passages():
    table = _table(30)
    anchor = find_anchor(table, _peak(30, 10), "after", SURE, 0.5, 0.05, 0.0)
    units = [(0, 0, 500), (0, 500, 1100), (0, 1100, 1500), (0, 2500, 3000), (1, 0, 3000)]
    bonus, wrong = unit_anchor(table, anchor, units)
    assert bonus[0] == 0 and bonus[1] == pytest.approx(anchor.bonus[5:11].max())
    assert bonus[2] == pytest.approx(anchor.bonus[11]) and bonus[2] > bonus[3] > 0
    assert wrong.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]  # another document is on no side


def test_the_record_says_the_passage_its_place_confidence_and_region():
    table = _table(40, chapters_at=(0, 10))
    anchor = find_anchor(table, _peak(40, 12), "after", SURE, 0.5, 0.05, 0.0)
    record = anchor_metadata(table, anchor, "The fire at the mill began. " * 20, "the fire")
    assert record["passage_id"] == "p12" and record["used"] is True
    assert record["where"]["chapter"] == "Chapter 10"
    assert record["where"]["percent"] == pytest.approx(30.0)
    assert record["region"]["start"]["char_offset"] == 1200
    assert record["region"]["end"]["char_offset"] > 1200 and len(record["text"]) <= 160
    line = describe(record)
    assert line.startswith('anchor (after "the fire"): Chapter 10 30%') and "used" in line


def test_a_long_story_asks_for_a_surer_anchor():
    from llama_index_e2rag.ranking.narrative import NarrativeWeights, locate_anchor
    from llama_index_e2rag.ranking.temporal import TemporalCue

    table = _table(30)  # 3,000 characters
    score = _peak(30, 10, 3.0)
    score[25] = 1.5  # a rival: a middling confidence
    clause = (score, np.zeros(30, dtype=np.float32), np.zeros(30, dtype=np.float32))
    cue = TemporalCue("after", "x", "after")
    w = NarrativeWeights(lexical=1.0, dense=0.0, event=0.0, anchor_calibration=SURE,
                         anchor_confidence=0.5, anchor_confidence_long=0.95)
    short = locate_anchor(table, cue, clause, w)
    assert short is not None and 0.5 <= short.confidence < 0.95 and short.used
    long = locate_anchor(table, cue, clause, NarrativeWeights(**{**w.__dict__,
                                                                 "long_chars": 1_000}))
    assert long is not None and long.confidence == short.confidence and not long.used
