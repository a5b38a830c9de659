"""Regenerate ``docs/img/story_axis.png``: the demo story's page, rendered in headless Chromium.

    python scripts/render_story_png.py [--store DIR] [--out docs/img/story_axis.png]

Indexes the bundled *Tale of Peter Rabbit* on the offline default (as ``e2rag demo`` does; kept
in ``--store`` when given), writes the page of one demo question with Peter's timeline
(``E2RAGIndex.visualize``) and screenshots its story axis and the question's subgraph with
Debian's ``chromium`` through playwright (``.ci/chromium.sh install``; no browser download).
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
    from playwright.sync_api import sync_playwright

    if not (store / "e2rag").is_dir():
        run_demo(store_dir=str(store), echo=lambda _line: None)
    page_html = load_store(store).visualize(query=QUESTIONS[0], entity="Peter")
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "story.html"
        page_file.write_text(page_html, encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(
                viewport={"width": 1100, "height": 900}, device_scale_factor=1.5
            )
            page.goto(page_file.as_uri(), wait_until="load")
            box = page.locator(LAST_SECTION).bounding_box()
            if box is None:
                raise RuntimeError(f"the page has no {LAST_SECTION} section")
            bottom = box["y"] + box["height"] + 8
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(
                path=str(out),
                clip={"x": 0, "y": 0, "width": 1100, "height": bottom},
                full_page=True,
            )
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help="demo store (built if empty)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "story_axis.png")
    args = parser.parse_args()
    if args.store is not None:
        render(args.store, args.out)
    else:
        with tempfile.TemporaryDirectory() as folder:
            render(Path(folder) / "store", args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
