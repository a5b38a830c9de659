"""spaCy parses of many texts, in worker processes when asked, that stop when the caller stops.

Why not ``nlp.pipe(n_process=...)``: spaCy's pool can only end in order (it finishes the batches
already sent, then joins its workers), so a Ctrl-C during a book's parse waited for the parse; and
its workers are not ours to end. Here the workers are a ``multiprocessing.Pool`` that ignores
Ctrl-C (the parent decides), is polled so a stopped job (``background.check``) or a
``KeyboardInterrupt`` ends it within ``POLL_SECONDS``, and is terminated, never drained, however
the parse ends. Docs travel as ``Doc.to_bytes()``, as in spaCy's own pool, and come back in input
order, one per text.
"""

from __future__ import annotations

import multiprocessing
from functools import partial
from typing import Any, Iterator, Sequence

from llama_index_e2rag.background import check
from llama_index_e2rag.extract.spacy_model import load_spacy

#: How often the parent looks up from waiting for a batch to see whether it should stop.
POLL_SECONDS = 0.1


def parse_texts(
    nlp: Any, model: str, texts: Sequence[str], batch_size: int, n_process: int
) -> Iterator[Any]:
    """``nlp``'s docs of ``texts`` in order; ``n_process > 1`` parses batches of ``batch_size``
    texts in that many worker processes (of the start method the platform uses, each with the
    pipeline ``model``: forked workers share the parent's loaded copy)."""
    if n_process <= 1:
        for doc in nlp.pipe(texts, batch_size=batch_size):
            check()
            yield doc
        return
    from spacy.tokens import Doc

    batches = [list(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    pool = multiprocessing.get_context().Pool(
        min(n_process, len(batches)), initializer=_ignore_ctrl_c
    )
    try:
        results = pool.imap(partial(_parse_batch, model), batches)
        for _ in batches:
            for data in _next(results):
                check()  # the caller's work per doc is not free either
                yield Doc(nlp.vocab).from_bytes(data)
        pool.close()
        pool.join()
    finally:
        pool.terminate()


def _next(results: Any) -> list[bytes]:
    """The next batch, waiting in short steps so that a stop request is seen."""
    while True:
        check()
        try:
            return results.next(timeout=POLL_SECONDS)
        except multiprocessing.TimeoutError:
            continue


def _ignore_ctrl_c() -> None:
    """A terminal's Ctrl-C reaches the workers too; the parent ends them (no tracebacks)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _parse_batch(model: str, texts: list[str]) -> list[bytes]:
    """In a worker: parse one batch (the pipeline loads once per worker, unless forked)."""
    return [doc.to_bytes() for doc in load_spacy(model).pipe(texts, batch_size=len(texts))]
