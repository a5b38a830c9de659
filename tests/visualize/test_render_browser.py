"""The story page in a real headless browser (Debian's ``chromium`` driven by ``playwright``):
it loads with no console error and no request but its own file, shows the expected nodes, and
book text stays text.

Skips (with the reason) when Chromium or playwright is missing, unless ``CI=true``: then it
fails, since ``scripts/test.sh`` installs both (``.ci/chromium.sh``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from llama_index.core import Settings
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


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled story indexed on the offline default (spaCy parse, MiniLM embedding)."""
    folder = tmp_path_factory.mktemp("demo")
    book = folder / "peter_rabbit.txt"
    shutil.copy(SAMPLE_PATH, book)
    store = folder / "store"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Settings, "_llm", None)
        patch.setattr(Settings, "_embed_model", None)
        assert main(["index", str(book), "--store", str(store), "--quiet"]) == 0
    return store


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
    assert all("peter" in text.lower() for text in texts)  # the title page says PETER


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
