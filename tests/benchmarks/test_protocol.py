"""The novel protocol's book groups (length thirds, folds), its pooled figures and its report."""

from __future__ import annotations

import pytest

from benchmarks import report
from benchmarks.loaders import Narrative, Question, load_literaryqa
from benchmarks.protocol import (
    FOLDS,
    THIRDS,
    Row,
    by_third,
    length_thirds,
    place_books,
    pooled,
    third_ranges,
)


def _books(n: int) -> list[tuple[str, int]]:
    # word counts deliberately not in id order, with ties
    return [(f"b{i:02d}", 1000 + (i * 37) % 11 * 100) for i in range(n)]


@pytest.mark.parametrize("n", [3, 4, 5, 10, 43, 44, 45, 50])
def test_thirds_are_consecutive_runs_of_the_length_order_as_equal_as_possible(n):
    places = place_books(_books(n))
    order = sorted(places.values(), key=lambda p: p.rank)
    assert [p.rank for p in order] == list(range(n))
    assert [(p.words, p.doc_id) for p in order] == sorted((p.words, p.doc_id) for p in order)
    sizes = [sum(p.third == t for p in order) for t in THIRDS]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    thirds = [THIRDS.index(p.third) for p in order]
    assert thirds == sorted(thirds)  # short, then medium, then long


def test_44_books_split_15_15_14_and_folds_alternate_by_rank():
    places = place_books(_books(44))
    assert [sum(p.third == t for p in places.values()) for t in THIRDS] == [15, 15, 14]
    for place in places.values():
        assert place.fold == FOLDS[place.rank % 2]
    for third in THIRDS:  # each fold holds half of every third
        counts = [sum(p.third == third and p.fold == f for p in places.values()) for f in FOLDS]
        assert abs(counts[0] - counts[1]) <= 1


def test_ties_in_length_are_ordered_by_doc_id_whatever_the_input_order():
    books = [("pg9", 500), ("pg10", 500), ("pg1", 400)]
    for ordering in (books, books[::-1]):
        places = place_books(ordering)
        assert [d for d, _ in sorted(places.items(), key=lambda kv: kv[1].rank)] == \
            ["pg1", "pg10", "pg9"]


def test_duplicate_book_ids_are_refused():
    with pytest.raises(ValueError):
        place_books([("a", 1), ("a", 2), ("b", 3)])


def test_ranges_count_the_whole_set_and_the_books_a_run_covers():
    places = place_books(_books(9))
    covered = [d for d, p in places.items() if p.rank < 4]
    ranges = third_ranges(places, covered)
    assert [ranges[t]["books"] for t in THIRDS] == [3, 3, 3]
    assert [ranges[t]["books_run"] for t in THIRDS] == [3, 1, 0]
    assert ranges["short"]["max_words"] <= ranges["medium"]["min_words"]


def test_pooled_is_the_ratio_of_per_question_means_with_time_questions_apart():
    mine = [Row("q1", "a", "x", 1.0, True), Row("q2", "a", "x", 0.0, False),
            Row("q3", "b", "x", None, False)]
    base = [Row("q1", "a", "hybrid", 0.5, True), Row("q2", "a", "hybrid", 0.5, False),
            Row("q3", "b", "hybrid", 1.0, False)]
    figures = pooled(mine, base)
    assert figures["atr"] == pytest.approx(0.5)
    # None is left out of the mean, as the benchmark does: 0.5 / mean(0.5, 0.5, 1.0)
    assert figures["atr_vs_hybrid"] == pytest.approx(0.5 / (2 / 3))
    assert figures["n_time"] == 1 and figures["atr_time_vs_hybrid"] == pytest.approx(2.0)


def test_by_third_compares_each_third_with_the_hybrid_on_the_same_books():
    places = place_books([("s", 10), ("m", 20), ("l", 30)])
    rows = [Row("q1", "s", "hybrid", 0.5, False), Row("q2", "l", "hybrid", 0.25, False),
            Row("q1", "s", "x", 1.0, False), Row("q2", "l", "x", 0.25, False)]
    out = by_third(rows, places)
    assert out["x"]["short"]["atr_vs_hybrid"] == pytest.approx(2.0)
    assert out["x"]["long"]["atr_vs_hybrid"] == pytest.approx(1.0)
    assert "medium" not in out["x"]
    assert out["x"]["all"]["atr_vs_hybrid"] == pytest.approx(1.25 / 0.75)
    with pytest.raises(ValueError):
        by_third([Row("q9", "elsewhere", "x", 1.0, False)], places)


def _narrative(doc_id: str, words: int, questions: list[str]) -> Narrative:
    return Narrative(doc_id, doc_id, " ".join(["w"] * words),
                     [Question(f"{doc_id}-{i}", q, ["a"]) for i, q in enumerate(questions)])


def test_a_run_of_some_books_reports_them_in_their_thirds_among_all_and_renders(tmp_path):
    books = [_narrative(f"d{i}", 100 * (i + 1), ["Who came?", "What happened after the ball?"])
             for i in range(6)]
    run = books[:2] + books[5:]  # two short books, one long
    per_question = [{"qid": q.qid, "system": system, "atr": atr}
                    for b in run for q in b.questions
                    for system, atr in (("hybrid", 0.5), ("narrative", 0.6))]
    thirds = length_thirds(per_question, books)
    assert [thirds["ranges"][t]["books_run"] for t in THIRDS] == [2, 0, 1]
    narrative = thirds["systems"]["narrative"]
    assert set(narrative) == {"all", "short", "long"}
    assert narrative["short"]["n_time"] == 2 and narrative["long"]["n"] == 2
    assert narrative["all"]["atr_vs_hybrid"] == pytest.approx(1.2)
    data = {"dataset": "literaryqa", "split": "validation", "budget_words": 1500,
            "window_words": 100, "sources": 3, "questions": 6, "index_build_seconds_total": 1.0,
            "systems": {"hybrid": {"n": 6, "atr": 0.5}, "narrative": {"n": 6, "atr": 0.6}},
            "length_thirds": thirds}
    results = {"profile": "quick", "machine": report.machine_info(), "embed_model": "m",
               "modes": ["narrative"], "quality": {"literaryqa": data}}
    text = report.render(results, tmp_path / "img", tmp_path / "benchmarks.md")
    table = text.split("Per book-length third", 1)[1]
    assert "medium: 300–400 words, 0 of 2 books, no book in this run" in table
    assert "| narrative | 1.20 / 1.20 | 1.20 / 1.20 | – | 1.20 / 1.20 |" in table


@pytest.mark.shared_data
def test_the_44_validation_books_fall_into_thirds_of_15_15_14(shared_data):
    books = load_literaryqa(shared_data)
    places = place_books((b.doc_id, b.words) for b in books)
    assert len(places) == 44
    ranges = third_ranges(places)
    assert [ranges[t]["books"] for t in THIRDS] == [15, 15, 14]
    assert ranges["short"]["max_words"] < ranges["medium"]["min_words"]
    assert ranges["medium"]["max_words"] < ranges["long"]["min_words"]
