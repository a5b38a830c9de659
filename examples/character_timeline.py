"""A character's timeline and the story page: where a character appears, what they take part in,
and where a question's evidence sits along the story.

    python examples/character_timeline.py                       # Peter, in the bundled story
    python examples/character_timeline.py --book pride.txt --name Elizabeth \
        --question "Why did Elizabeth refuse Darcy?" --page pride.html

Offline as written (without ``OPENAI_API_KEY``: spaCy graph, MiniLM embeddings). The timeline
needs E²GraphRAG's fused entities, the ``EventGraphBuilder`` layer: built here with the index;
an existing index gets it with ``index.add_layers([EventGraphBuilder()])`` (``e2rag index --store
DIR --event-graph`` from a shell), nothing extracted again. The page is one self-contained HTML
file (open it in any browser), written into a new temporary folder unless ``--page`` names one
(a file already there is replaced).
"""
# tested-by: tests/integration/test_examples_app.py


from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from llama_index.core import SimpleDirectoryReader

import llama_index_e2rag
from llama_index_e2rag import E2RAGIndex, EventGraphBuilder

STORY = Path(llama_index_e2rag.__file__).parent / "data" / "peter_rabbit.txt"
SHOWN = 12  # timeline entries printed (the page shows them all)


def main(book: Path, name: str, question: str, page: Path) -> None:
    documents = SimpleDirectoryReader(input_files=[book]).load_data()
    index = E2RAGIndex.from_documents(documents, doc_builders=[EventGraphBuilder()])

    timeline = index.entity_timeline(name)
    entity = timeline.entity
    print(f"{name} (fused entity {entity.name!r}, also {', '.join(entity.aliases) or '-'}): "
          f"{timeline.mention_count} mentions and {timeline.event_count} events in story order")
    for entry in timeline.entries[:SHOWN]:
        others = f"  [with {', '.join(entry.participants)}]" if entry.participants else ""
        text = " ".join(entry.text.split())[:80]
        print(f"  {entry.position:<42} {entry.kind:<7} {text}{others}")
    if len(timeline.entries) > SHOWN:
        print(f"  … {len(timeline.entries) - SHOWN} more")

    # the same index draws the page: the story axis, the question's evidence and subgraph, the
    # character's timeline (e2rag show --html PAGE --query … --entity … from a shell)
    html = index.visualize(question, path=page, entity=name)
    print(f"wrote {page} ({len(html.encode('utf-8')) // 1024} KB): open it in a browser")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--book", type=Path, default=STORY, help="a text file (Peter Rabbit)")
    parser.add_argument("--name", default="Peter", help="the character")
    parser.add_argument(
        "--question", default="What happened to Peter after he lost his shoes?"
    )
    parser.add_argument("--page", type=Path, default=None, help="where to write the HTML page")
    args = parser.parse_args()
    page = args.page or Path(tempfile.mkdtemp()) / "story.html"
    main(args.book, args.name, args.question, page)
