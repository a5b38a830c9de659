"""Regenerate the pictures of ``docs/visualize.md``: story pages rendered in headless Chromium.

    python scripts/render_story_png.py [--store DIR] [--out docs/img/story_axis.png]
    python scripts/render_story_png.py --html PAGE --out PNG [--first SEL] [--last SEL]

Without ``--html``: indexes the bundled *Tale of Peter Rabbit* on the offline default (as
``e2rag demo`` does; kept in ``--store`` when given), writes the page of one demo question with
Peter's timeline (``E2RAGIndex.visualize``) and screenshots its story axis and the question's
subgraph. With ``--html``: screenshots a page ``e2rag show --html`` wrote (a novel's), from the
top of ``--first`` to the bottom of ``--last`` (at most ``--max-height`` pixels). Debian's
``chromium`` through playwright (``.ci/chromium.sh install``; no browser download).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.app.demo import QUESTIONS, run_demo

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
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
#: The picture ends with this section: the title, the query, the story axis and the query's
#: subgraph (the evidence list and the timeline read better as text).
LAST_SECTION = "#subgraph"


def render(store: Path, out: Path) -> None:
    """Build the demo store if ``store`` has none, then write the PNG of its page."""
    if not (store / "e2rag").is_dir():
        run_demo(store_dir=str(store), echo=lambda _line: None)
    page_html = load_store(store).visualize(query=QUESTIONS[0], entity="Peter")
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "story.html"
        page_file.write_text(page_html, encoding="utf-8")
        screenshot(page_file, out)


def screenshot(
    page_file: Path,
    out: Path,
    first: str | None = None,
    last: str = LAST_SECTION,
    max_height: float | None = None,
) -> None:
    """The PNG of ``page_file`` from the top of ``first`` (the page's top when None) to the
    bottom of ``last``, cut at ``max_height`` pixels."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=1.5)
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        boxes = [page.locator(sel).bounding_box() if sel else None for sel in (first, last)]
        for sel, box in zip((first, last), boxes):
            if sel and box is None:
                raise RuntimeError(f"the page has no {sel} section")
        top = boxes[0]["y"] - 8 if boxes[0] else 0
        bottom = boxes[1]["y"] + boxes[1]["height"] + 8  # type: ignore[index]
        height = bottom - top if max_height is None else min(bottom - top, max_height)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(out), clip={"x": 0, "y": top, "width": 1100, "height": height},
            full_page=True,
        )
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help="demo store (built if empty)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "story_axis.png")
    parser.add_argument("--html", type=Path, default=None, help="a page to screenshot as it is")
    parser.add_argument("--first", default=None, help="with --html: the first section shown")
    parser.add_argument("--last", default=LAST_SECTION, help="with --html: the last one")
    parser.add_argument("--max-height", type=float, default=None, help="with --html: in px")
    args = parser.parse_args()
    if args.html is not None:
        screenshot(args.html, args.out, args.first, args.last, args.max_height)
    elif args.store is not None:
        render(args.store, args.out)
    else:
        with tempfile.TemporaryDirectory() as folder:
            render(Path(folder) / "store", args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
