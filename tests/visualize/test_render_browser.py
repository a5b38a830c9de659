"""The story page in a real headless browser (Debian's ``chromium`` driven by ``playwright``):
it loads with no console error and no request but its own file, shows the expected nodes, and
book text stays text.

Skips (with the reason) when Chromium or playwright is missing, unless ``CI=true``: then it
fails, since ``scripts/test.sh`` installs both (``.ci/chromium.sh``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from llama_index.core import Settings
from novel_stories import VARIANTS, Story, build
from visualize.test_render import INJECTION, _evidence, _injected_story

from llama_index_e2rag.cli.entry import main
from llama_index_e2rag.app.demo import SAMPLE_PATH
from llama_index_e2rag.visualize import Evidence, collect_page, evidence_from_results, story_page

CHROMIUM = Path(os.environ.get("E2RAG_CHROMIUM", "/usr/bin/chromium"))
#: Headless and quiet: no GPU, no sandbox (containers), and none of Chromium's own traffic
#: (updates, sync, QUIC probes) that would blur the "no network request" check.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUESTION = "Where did Peter lose his shoes?"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI installs it with scripts/test.sh (.ci/chromium.sh)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    if not CHROMIUM.is_file():
        _missing(f"no Chromium at {CHROMIUM} (run: bash .ci/chromium.sh install)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Loaded:
    """A page opened from a file, with what it logged and requested while loading."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1100, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on(
            "console", lambda m: m.type in ("error", "warning") and self.errors.append(m.text)
        )
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url, wait_until="load")

    def attrs(self, selector: str, *names: str) -> list[tuple[str, ...]]:
        return [
            tuple(el.get_attribute(name) for name in names)
            for el in self.page.query_selector_all(selector)
        ]


def _pos(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in value.split(","))


def test_a_page_with_hostile_book_text_loads_clean_and_shows_its_nodes(
    browser: Any, tmp_path: Path
) -> None:
    evidence = [
        Evidence(
            rank=1,
            node_id="p1",
            doc_id="first",
            pos=(0, 0, 0),
            text=INJECTION,
            chunk_id="first-c0",
            span=(0, 100),
        ),
        _evidence(2, "second-c0", (1, 0, 0), (0, 100), graph_node_ids=("e-return",)),
    ]
    graph = _injected_story()
    path = tmp_path / "story.html"
    path.write_text(story_page(graph, query=INJECTION, evidence=evidence, entity="Anna"), "utf-8")
    loaded = Loaded(browser, path)
    page = loaded.page

    assert loaded.errors == [] and loaded.requests == [loaded.url]
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.text_content("#query") == INJECTION  # shown as text, whole
    expected = collect_page(graph, query="q", evidence=evidence, entity="Anna")
    marks = loaded.attrs("#subgraph-svg g.mark", "data-id", "data-kind", "data-pos", "data-ranks")
    assert marks == [
        (m.node_id, m.kind, ",".join(map(str, m.pos)), " ".join(map(str, m.ranks)))
        for m in expected.marks
    ]
    assert {kind for _, kind, _, _ in marks} == {"mention", "event"}
    timeline = loaded.attrs("#timeline li", "data-id", "data-pos")
    assert [i for i, _ in timeline] == ["m-anna1", "m-anna2", "m-anna3"]

    # hovering a passage highlights its nodes (the page's one script ran)
    page.hover('#evidence li[data-rank="2"]')
    highlighted = page.eval_on_selector_all(
        "#subgraph-svg g.mark.hl", "els => els.map(e => e.dataset.id)"
    )
    assert highlighted == ["e-return"]


def _index(book: Path, store: Path, *flags: str) -> Path:
    """``e2rag index`` on the offline default (spaCy parse, MiniLM embedding)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Settings, "_llm", None)
        patch.setattr(Settings, "_embed_model", None)
        assert main(["index", str(book), "--store", str(store), *flags, "--quiet"]) == 0
    return store


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled story indexed on the offline default."""
    folder = tmp_path_factory.mktemp("demo")
    book = folder / "peter_rabbit.txt"
    shutil.copy(SAMPLE_PATH, book)
    return _index(book, folder / "store")


@pytest.fixture(scope="module")
def novel_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Story, Path]:
    """A novel-like story of ours (eight chapters, about 6,000 words: the Hale family and
    titled others, ``tests/novel_stories.py``) indexed with the event graph."""
    folder = tmp_path_factory.mktemp("novel")
    story = build(VARIANTS[0])
    book = folder / f"{story.variant.name}.txt"
    book.write_text(story.text, encoding="utf-8")
    return story, _index(book, folder / "store", "--event-graph")


@pytest.mark.spacy  # demo_store: the CLI's offline default
@pytest.mark.minilm
def test_the_cli_page_of_the_demo_story_shows_the_query_and_the_timeline(
    browser: Any, demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``e2rag show --html`` on the real offline default: the page ``index.visualize`` makes,
    every retrieved passage and its graph nodes on the axis in story order, Peter's timeline
    in story order."""
    from llama_index_e2rag.cli.store import load_store

    out = tmp_path / "story.html"
    argv = [
        "show",
        "--store",
        str(demo_store),
        "--html",
        str(out),
        "--query",
        QUESTION,
        "--entity",
        "Peter",
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out} (")
    index = load_store(demo_store)
    api = index.visualize(query=QUESTION, path=tmp_path / "api.html", entity="Peter")
    assert out.read_text(encoding="utf-8") == api  # one page, whichever client asks
    evidence = evidence_from_results(index.as_retriever().retrieve(QUESTION))

    loaded = Loaded(browser, out)
    assert loaded.errors == [] and loaded.requests == [loaded.url]
    listed = loaded.attrs("#evidence li", "data-rank", "data-pos")
    assert listed == [(str(e.rank), ",".join(map(str, e.pos or ()))) for e in evidence]
    bars = loaded.attrs("#subgraph-svg g.passage", "data-rank")
    assert sorted(int(r) for (r,) in bars) == [e.rank for e in evidence]

    marks = loaded.page.eval_on_selector_all(
        "#subgraph-svg g.mark",
        "els => els.map(e => [e.dataset.kind, e.dataset.pos, e.getBoundingClientRect().x])",
    )
    assert {kind for kind, _, _ in marks} == {"mention", "event"}  # the grounded parse's graph
    by_story = sorted(marks, key=lambda m: _pos(m[1]))
    assert [x for _, _, x in by_story] == sorted(x for _, _, x in marks)  # x follows the story
    timeline = [_pos(p) for (p,) in loaded.attrs("#timeline li", "data-pos")]
    assert len(timeline) >= 5 and timeline == sorted(timeline)
    texts = loaded.page.eval_on_selector_all("#timeline li", "els => els.map(e => e.textContent)")
    # every entry names him (the title page says PETER) or holds a pronoun resolved to him,
    # also where he was last named in the chunk before ("After losing them, he ran on")
    assert all(re.search(r"\b(peter|he|him|his)\b", text.lower()) for text in texts)
    assert sum("peter" in text.lower() for text in texts) * 2 >= len(texts)


@pytest.mark.spacy  # demo_store: the CLI's offline default
@pytest.mark.minilm
def test_show_html_bad_input_is_one_line_and_writes_nothing(
    demo_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "story.html")
    cases = [
        (["--entity", "Peter"], "--entity apply only with --html FILE"),
        (["--html", str(tmp_path / "no" / "story.html")], f"folder {tmp_path / 'no'} does not"),
        (["--html", out, "--entity", "Petr"], "no mention named 'Petr' in the story; closest: "),
        (["--html", out, "--query", "Who?", "--mode", "chrono"], f"{demo_store} --chrono"),
        (["--html", out, "--mode", "grounded"], "--mode chooses how --query retrieves"),
        (["--html", out, "--query", " "], "--query is empty"),
    ]
    for extra, message in cases:
        assert main(["show", "--store", str(demo_store), *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("e2rag: error: ") and err.count("\n") == 1 and message in err
    assert list(tmp_path.iterdir()) == []


#: What a form of the heroine's name or a pronoun for her looks like in an entry's text.
_HER = r"\b(?:{name}|she|her|hers|herself)\b"


def _chapter_starts(text: str) -> list[tuple[int, str]]:
    """(offset, "IV") of each chapter heading of a story of ``novel_stories``, in order."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"^CHAPTER ([IVXL]+)\.", text, re.M)]


@pytest.fixture(scope="module")
def novel_page(
    novel_store: tuple[Story, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Story, Path]:
    """``e2rag show --html --entity`` on the novel, with the name a reader would type for its
    heroine ("Margaret")."""
    story, store = novel_store
    out = tmp_path_factory.mktemp("novel-page") / "novel.html"
    assert main(["show", "--store", str(store), "--html", str(out), "--entity",
                 story.variant.heroine]) == 0
    return story, out


def _on_the_novel(test: Any) -> Any:
    """Marks a test of the novel's page: Chromium, and the CLI's offline default (spaCy,
    MiniLM) with the event graph for ``novel_store``."""
    return pytest.mark.chromium(pytest.mark.spacy(pytest.mark.minilm(test)))


def _family(story: Story) -> tuple[str, str, str]:
    v = story.variant
    return v.father, v.mother, f"{v.heroine} {v.surname}"


def _entries(loaded: Loaded) -> list[tuple[str | None, list[tuple[str, str]]]]:
    """The timeline list: (chapter heading, [(data-pos, text), ...]) per group."""
    return loaded.page.eval_on_selector_all(
        "#timeline div.chapter-entries",
        """els => els.map(g => [g.dataset.chapter || null,
            Array.from(g.querySelectorAll('li[data-pos]')).map(li => [li.dataset.pos,
                li.querySelector('.text').textContent])])""",
    )


@_on_the_novel
def test_a_novels_page_shows_its_chapters_its_people_and_her_course_chapter_by_chapter(
    browser: Any, novel_page: tuple[Story, Path]
) -> None:
    """The page loads clean; the lanes are the story's people under their full names (the
    father and the daughter apart); the axis labels the chapters in order; the heroine's
    timeline is titled with her full name and reads in story order under the headings of the
    chapters its entries fall in."""
    story, out = novel_page
    father, _, heroine = family = _family(story)
    loaded = Loaded(browser, out)
    page = loaded.page
    assert loaded.errors == [] and loaded.requests == [loaded.url]

    lanes = [name for (name,) in loaded.attrs("#overview-svg g.character", "data-name")]
    assert lanes and set(lanes) <= {*family, *story.variant.others}  # people, never a place
    assert len(set(lanes)) == len(lanes) and {father, heroine} <= set(lanes)

    chapters = _chapter_starts(story.text)
    assert len(page.query_selector_all("#overview-svg line.chapter")) == len(chapters)
    labels = page.eval_on_selector_all(
        "#overview-svg text.chapter-label",
        "els => els.map(e => [e.getBoundingClientRect().x, e.textContent])",
    )
    numerals = [numeral for _, numeral in chapters]
    assert len(labels) >= 2 and sorted(labels) == labels  # left to right...
    shown = [numeral for _, numeral in labels]
    assert [n for n in numerals if n in shown] == shown  # ...in the story's order

    assert page.text_content("#timeline h2 .name") == heroine
    groups = _entries(loaded)
    positions = [_pos(pos) for _, members in groups for pos, _ in members]
    assert len(positions) >= 50 and positions == sorted(positions)
    assert len(positions) == len(page.query_selector_all("#timeline li[data-pos]"))
    headings = [chapter for chapter, _ in groups]
    assert headings == [f"Chapter {n}" for n in numerals if f"Chapter {n}" in headings]
    assert len(headings) == len(chapters)  # she is in every chapter of this story
    ends = [start for start, _ in chapters[1:]] + [len(story.text)]
    bounds = {f"Chapter {n}": (start, end) for (start, n), end in zip(chapters, ends)}
    for chapter, members in groups:
        start, end = bounds[chapter]
        assert all(start <= _pos(pos)[1] < end for pos, _ in members), chapter


@_on_the_novel
def test_a_novels_page_keeps_the_family_apart_and_her_timeline_about_her(
    browser: Any, novel_page: tuple[Story, Path]
) -> None:
    """Father, mother and daughter share a surname and stay three lanes; the daughter's
    timeline is hers: most entries name her or say "she"/"her" (the others: the events she
    takes part in told from another's side)."""
    story, out = novel_page
    loaded = Loaded(browser, out)
    lanes = [name for (name,) in loaded.attrs("#overview-svg g.character", "data-name")]
    assert set(_family(story)) <= set(lanes), lanes
    texts = [text for _, members in _entries(loaded) for _, text in members]
    her = re.compile(_HER.format(name=re.escape(story.variant.heroine)), re.IGNORECASE)
    assert sum(1 for text in texts if her.search(text)) >= 0.8 * len(texts), [
        text for text in texts if not her.search(text)
    ]
