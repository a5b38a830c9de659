"""The scaling benchmark's library sizes: distinct documents of the asked size, layout kept,
read round the books again when they hold fewer words than asked."""

from __future__ import annotations

import random

import pytest

from benchmarks.loaders import Narrative, word_windows
from benchmarks.scaling import growth_exponent


def _books(rng: random.Random, n: int) -> list[Narrative]:
    books = []
    for b in range(n):
        paragraphs = [
            " ".join(f"b{b}p{p}w{w}" for w in range(rng.randint(3, 30)))
            for p in range(rng.randint(2, 8))
        ]
        books.append(Narrative(f"book{b}", f"Book {b}", "\n\n".join(paragraphs), []))
    return books


@pytest.mark.parametrize("seed", range(4))
def test_windows_are_distinct_documents_of_the_asked_size(seed: int) -> None:
    rng = random.Random(seed)
    books = _books(rng, rng.randint(1, 4))
    available = sum(b.words for b in books)
    docs = rng.randint(2, 9)
    words = docs * rng.randint(1, 2 * available)  # often more than the books hold
    windows = word_windows(books, words, docs)
    assert len(windows) == docs
    assert all(len(w.split()) == words // docs for w in windows)
    assert len(set(windows)) == min(docs, available)  # distinct while the books allow
    corpus = "\n\n".join(b.text for b in books)
    first = windows[0].split("\n\n")[0]
    assert first in corpus  # the books' own layout (paragraph breaks), not re-spaced words


def test_the_growth_exponent_of_a_linear_and_a_quadratic_series() -> None:
    xs = [1e4, 1e5, 1e6]
    assert growth_exponent(xs, [3 * x for x in xs]) == pytest.approx(1.0)
    assert growth_exponent(xs, [x * x for x in xs]) == pytest.approx(2.0)
