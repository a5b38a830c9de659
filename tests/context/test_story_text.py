"""A story's text in words: chapter headings (not a table of contents, not a licence's
sections) and labelled shares of the story (``context.story_text``)."""

from __future__ import annotations

import re

from llama_index_e2rag.context.story_text import (
    StoryMap,
    describe_position,
    headings,
    source_name,
    without_contents,
)

BOOK = (
    "THE GARDEN\n\nCHAPTER I.\n\nPeter lived with his mother under a fir tree.\n\n"
    "Part of the garden was locked.\n\n"
    "Chapter 2: The Net\n\nHe ran into a gooseberry net.\n\n"
    "BOOK THREE\n\nHe came home at last."
)


def test_headings_are_whole_heading_lines_with_their_number():
    found = headings(BOOK, base=100)
    assert [label for _, label in found] == ["Chapter I", "Chapter 2", "Book Three"]
    assert [offset - 100 for offset, _ in found] == [
        BOOK.index("CHAPTER I."), BOOK.index("Chapter 2"), BOOK.index("BOOK THREE")
    ]
    # Prose starting with a heading word is no heading.
    assert "Part" not in " ".join(label for _, label in found)


def test_headings_are_found_whatever_the_line_endings():
    # every Project Gutenberg file ends its lines in CRLF; old Mac files in CR alone are rare
    for ending in ("\r\n", "\n"):
        book = BOOK.replace("\n", ending)
        found = headings(book)
        assert [label for _, label in found] == ["Chapter I", "Chapter 2", "Book Three"], ending
        assert [offset for offset, _ in found] == [
            book.index("CHAPTER I."), book.index("Chapter 2"), book.index("BOOK THREE")
        ]


def test_markdown_headings_are_headings_and_hashes_in_prose_are_not():
    # .md books, and HTML or EPUB as LlamaIndex's readers (html2text) give them
    book = "# Chapter 1\n\nPeter ran.\n\n## CHAPTER II. The Net\n\nHe hid.\n\n#Chapter 3\nissue #4"
    assert [label for _, label in headings(book)] == ["Chapter 1", "Chapter II"]
    assert [offset for offset, _ in headings(book)] == [
        book.index("Chapter 1"), book.index("CHAPTER II")
    ]


def test_chapter_at_is_the_last_heading_before_the_offset():
    story = StoryMap(length=len(BOOK), headings=tuple(headings(BOOK)))
    assert story.chapter_at(BOOK.index("THE GARDEN")) is None
    assert story.chapter_at(BOOK.index("Peter lived")) == "Chapter I"
    assert story.chapter_at(BOOK.index("gooseberry")) == "Chapter 2"
    assert story.chapter_at(BOOK.index("came home")) == "Book Three"
    assert story.percent_at(0) == 0.0 and story.percent_at(len(BOOK)) == 100.0


def test_a_share_of_the_story_is_never_shown_bare():
    label = describe_position("novel.txt", 93.4, "Chapter 3", 12345)
    assert label == "novel.txt · Chapter 3 · 93% through the story"
    assert not re.search(r"\d+%(?! through the story)", label)
    # Without a share the character offset is the position; without either, the document only.
    assert describe_position("novel.txt", None, None, 12345) == "novel.txt · character 12,345"
    assert describe_position("novel.txt") == "novel.txt"


def test_source_name_prefers_the_file_name_then_the_id_then_the_order():
    assert source_name({"file_path": "/a/b/c.txt"}, "id") == "c.txt"
    assert source_name({"file_name": "x.txt", "title": "X"}, "id") == "x.txt"
    assert source_name({}, "id") == "id"
    assert source_name({}, None, 2) == "document 2"


def _contents_book(titles: list[str], between: str) -> str:
    """A book opening with a table of contents of ``titles``, ``between`` before its text."""
    listed = "".join(f"CHAPTER {n}. {t.upper()}\n\n" for n, t in zip(("I", "II", "III"), titles))
    text = "".join(
        f"CHAPTER {n}. {t.upper()}\n\n" + f"{t} happened, and the day went on. " * 20 + "\n\n"
        for n, t in zip(("I", "II", "III"), titles)
    )
    return "CONTENTS\n\n" + listed + between + text


def test_a_table_of_contents_lists_chapters_without_beginning_them():
    for between in ("", "PREFACE\n\n" + "A word before the story. " * 30 + "\n\n"):
        book = _contents_book(["The Letter", "Visitors", "Rain"], between)
        story = StoryMap(length=len(book), headings=tuple(without_contents(headings(book))))
        starts = [book.index(f"CHAPTER {n}.", book.index("happened") - 40) for n in ("I",)]
        assert [label for _, label in story.headings] == ["Chapter I", "Chapter II", "Chapter III"]
        assert story.headings[0][0] >= starts[0]  # the text's chapter, not the contents' line
        assert story.chapter_at(book.index("CONTENTS") + 20) is None  # contents, preface: none


def test_repeated_labels_far_apart_are_chapters_of_different_books():
    part = "CHAPTER I.\n\n" + "They walked to the mill. " * 20 + "\n\n"
    book = "BOOK ONE\n\n" + part + "BOOK TWO\n\n" + part
    assert without_contents(headings(book)) == headings(book)
