"""LitBank scoring against the reference definitions: the CoNLL reference scorer's own test
cases (conll/reference-coreference-scorers, test/TestCases.README: TC-A…TC-L), the worked
example of Pradhan et al. (2014, figure 1) and Luo (2005)'s CEAF-e; pooling over documents as
the reference scorer pools (summed numerators and denominators); mention and event P/R/F1."""

from __future__ import annotations

import pytest

from benchmarks.litbank.scoring import (
    Counts,
    Item,
    Ratio,
    clusters,
    coref_document,
    coref_prf,
    exact_key,
    head_key,
    match,
    score_events,
    score_mentions,
)

pytest.importorskip("scorch")


def _c(*groups: str) -> list[set[str]]:
    """``_c("a", "bc")`` -> [{"a"}, {"b", "c"}] (one letter per mention, as the README)."""
    return [set(g) for g in groups]


KEY_A = _c("a", "bc", "def")
# (response, expected (R, P) per metric); None: the reference gives no figure for the metric
REFERENCE_CASES = {
    "TC-A-1": (_c("a", "bc", "def"), {"muc": (1, 1), "b3": (1, 1), "ceafe": (1, 1)}),
    "TC-A-2": (_c("a", "de"), {"muc": (1 / 3, 1), "b3": (7 / 18, 1), "ceafe": (0.6, 0.9)}),
    "TC-A-3": (_c("a", "bcx", "defy", "z"),
               {"muc": (1, 3 / 5), "b3": (1, 55 / 108), "ceafe": (0.88571, 0.66429)}),
    "TC-A-4": (_c("a", "bcx", "dy", "z"),
               {"muc": (1 / 3, 1 / 3), "b3": (5 / 9, 17 / 42), "ceafe": (0.73333, 0.55)}),
    # "B": a mention overlapping b, a different mention
    "TC-A-5": ([{"a"}, {"b", "c", "x", "B"}, {"d", "y"}, {"z"}],
               {"muc": (1 / 3, 1 / 4), "b3": (5 / 9, 5 / 16), "ceafe": (0.68889, 0.51667)}),
    "TC-A-6": ([{"a"}, {"b", "c", "x"}, {"d", "y"}, {"B", "z"}],
               {"muc": (1 / 3, 1 / 4), "b3": (5 / 9, 17 / 48), "ceafe": (0.73333, 0.55)}),
    "TC-A-10": (_c("a", "b", "c", "d", "e", "f"), {"muc": (0, 0), "b3": (3 / 6, 1)}),
    "TC-A-11": (_c("abcdef"), {"muc": (1, 3 / 5), "b3": (1, 7 / 18)}),
    "TC-A-12": (_c("a", "x", "y", "c", "d", "e", "z"), {"muc": (0, 0), "b3": (13 / 36, 4 / 7)}),
    "TC-A-13": (_c("axycdez"), {"muc": (1 / 3, 1 / 6), "b3": (17 / 36, 6 / 49)}),
}


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_reference_scorer_cases_on_key_a(case):
    response, expected = REFERENCE_CASES[case]
    got = coref_prf(coref_document(KEY_A, response))
    for metric, (recall, precision) in expected.items():
        assert got[metric]["r"] == pytest.approx(recall, abs=1e-4), (case, metric)
        assert got[metric]["p"] == pytest.approx(precision, abs=1e-4), (case, metric)


@pytest.mark.parametrize("key,response,muc,b3", [
    # TC-D-1 / TC-E-1: the B-cubed paper's merges
    (_c("12345", "67", "89ABC"), _c("12345", "6789ABC"), (1, 9 / 10), (1, 16 / 21)),
    (_c("12345", "67", "89ABC"), _c("1234589ABC", "67"), (1, 9 / 10), (1, 7 / 12)),
    # TC-F-1, TC-G-1, TC-J-1, TC-K-1, TC-L-1: the MUC paper's examples
    (_c("ABCD"), _c("AB", "CD"), (2 / 3, 1), None),
    (_c("AB", "CD"), _c("ABCD"), (1, 2 / 3), None),
    (_c("ABC"), _c("AC"), (1 / 2, 1), None),
    (_c("BCDEGHJ"), _c("ABC", "DEF", "GHI"), (3 / 6, 3 / 6), None),
    (_c("ABC", "DEFG"), _c("AB", "CD", "FGH"), (2 / 5, 2 / 4), None),
])
def test_muc_and_b3_papers_examples(key, response, muc, b3):
    got = coref_prf(coref_document(key, response))
    if muc is not None:
        assert (got["muc"]["r"], got["muc"]["p"]) == pytest.approx(muc)
    if b3 is not None:
        assert (got["b3"]["r"], got["b3"]["p"]) == pytest.approx(b3)
    for metric in ("muc", "b3", "ceafe"):
        assert 0 <= got[metric]["f1"] <= 1


def test_pradhan_2014_figure_1():
    """Key {a b c} {d e f g}, response {a b} {c d} {f g h i}: MUC 0.4 / 0.4, B³ 35/84 and
    1/2, CEAF-e (φ4 0.8 + 0.5 over 2 and 3 entities) 0.65 and 0.4333, CoNLL the mean F1."""
    got = coref_prf(coref_document(_c("abc", "defg"), _c("ab", "cd", "fghi")))
    assert (got["muc"]["r"], got["muc"]["p"]) == pytest.approx((0.4, 0.4))
    assert (got["b3"]["r"], got["b3"]["p"]) == pytest.approx((35 / 84, 0.5))
    assert (got["ceafe"]["r"], got["ceafe"]["p"]) == pytest.approx((1.3 / 2, 1.3 / 3))
    mean = (got["muc"]["f1"] + got["b3"]["f1"] + got["ceafe"]["f1"]) / 3
    assert got["avg_f1"] == pytest.approx(mean)


def test_ceafe_aligns_one_to_one_luo_2005():
    """Luo (2005): the best one-to-one entity alignment, not each key entity's best response
    entity (both key entities would pick {a b c d} otherwise)."""
    got = coref_prf(coref_document(_c("ab", "cd"), _c("abcd")))
    assert got["ceafe"]["r"] == pytest.approx((2 * 2 / 6) / 2)
    assert got["ceafe"]["p"] == pytest.approx((2 * 2 / 6) / 1)


def test_documents_pool_numerators_and_denominators():
    """Two documents score as the reference scorer sums them, not as a mean of their figures."""
    first, second = coref_document(KEY_A, _c("a", "de")), coref_document(
        _c("abc", "defg"), _c("ab", "cd", "fghi"))
    pooled = {name: Ratio() for name in first}
    for part in (first, second):
        for name, ratio in part.items():
            pooled[name].add(ratio)
    got = coref_prf(pooled)
    # MUC recall: (1 + 2) / (3 + 5) links; B³ precision: (3 + 4) / (3 + 8) mentions
    assert got["muc"]["r"] == pytest.approx(3 / 8)
    assert got["b3"]["p"] == pytest.approx((3 + 4) / (3 + 8))
    assert got["ceafe"]["r"] == pytest.approx((1.8 + 1.3) / (3 + 2))


def test_empty_or_disjoint_sides_score_zero_without_error():
    assert coref_prf(coref_document(KEY_A, []))["avg_f1"] == 0
    assert coref_prf(coref_document([], _c("ab")))["avg_f1"] == 0
    disjoint = coref_prf(coref_document(_c("ab", "c"), _c("xy", "z")))
    assert all(disjoint[m][k] == 0 for m in ("muc", "b3", "ceafe") for k in ("r", "p", "f1"))


def test_clusters_keep_a_mention_once():
    got = clusters([("m1", "x"), ("m2", "x"), ("m1", "y"), ("m3", "y")])
    assert sorted(map(sorted, got)) == [["m1", "m2"], ["m3"]]


def _item(start, end, head, kind, category="NOM"):
    return Item(start, end, head, kind, category)


def test_mentions_exact_and_head_are_type_aware_one_to_one():
    gold = [_item(0, 10, 1, "PER", "PROP"), _item(20, 28, 5, "FAC"),
            _item(30, 33, 7, "PER", "PRON")]
    pred = [_item(0, 10, 1, "PER"),  # exact
            _item(22, 28, 5, "FAC"),  # head only
            _item(22, 28, 5, "FAC"),  # the same head again: one-to-one, a false positive
            _item(30, 33, 7, "GPE"),  # right span, wrong type
            _item(40, 45, 9, None)]  # no LitBank type: counts only untyped
    exact = score_mentions(gold, pred, exact_key)
    head = score_mentions(gold, pred, head_key)
    assert (exact.overall.tp, exact.overall.pred, exact.overall.gold) == (1, 4, 3)
    assert (head.overall.tp, head.overall.pred, head.overall.gold) == (2, 4, 3)
    assert head.by_type["FAC"].prf()["f1"] == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert head.by_type["GPE"].pred == 1 and head.by_type["GPE"].tp == 0
    assert exact.by_type["PER"].prf()["r"] == pytest.approx(0.5)
    # the PROP gold mention is matched whatever its prediction's own category
    assert head.by_category["PROP"].prf()["f1"] == 1
    assert head.by_category["PRON"].gold == 1 and head.by_category["PRON"].tp == 0
    assert (head.untyped.tp, head.untyped.pred) == (3, 5)


def test_match_pairs_in_text_order():
    gold = [_item(0, 1, 0, "PER"), _item(5, 6, 0, "PER")]
    assert match(gold, [_item(9, 9, 0, "PER")], head_key) == [(0, 0)]


def test_events_token_level():
    got = score_events([1, 2, 3, 4], [2, 3, 9]).prf()
    assert (got["p"], got["r"]) == pytest.approx((2 / 3, 2 / 4))
    assert Counts().prf()["f1"] == 0
