"""The models an index builds with, resolved lazily and once: LLM, its runner, embedding, chunk
settings, splitter and extractors.

Loading a store must never need an API key or a model download, so nothing here is resolved
before it is first asked for; a first use may come from several threads or tasks at once (one
lock, one resolution each). ``E2RAGIndex`` owns one ``IndexModels`` and hands it to ingestion and
the engine factory; it is usable alone (``IndexModels(embed_model=...).chunk_size``).
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TransformComponent

from llama_index_e2rag import embeddings
from llama_index_e2rag.extract.chunking import default_chunk_overlap, default_chunk_size
from llama_index_e2rag.extract.e2rag import EntityEventExtractor
from llama_index_e2rag.llm import runner as llm_runner

__all__ = ["IndexModels"]


class IndexModels:
    """Resolve on first use: ``llm`` (explicit > ``Settings.llm`` > OpenAI with a key > none),
    ``embed_model`` (the same, ending at the offline MiniLM), ``chunk_size`` (given or stored,
    else the default capped by the embedding's input limit), ``splitter`` and the extractors
    (given, else ``EntityEventExtractor`` with an LLM, ``GroundedExtractor`` without).

    Args:
        llm: extraction/answer LLM; resolved lazily (explicit > ``Settings.llm`` > OpenAI when
            ``OPENAI_API_KEY`` is set > none, which selects the LLM-free grounded extractor).
        embed_model: resolved lazily the same way, ending at the offline MiniLM embedding.
        extractors: chunk ``TransformComponent``s; default ``EntityEventExtractor`` with an LLM,
            else ``GroundedExtractor``.
        chunk_size: tokens per chunk; default 1,200 (LightRAG's), capped at the embedding
            model's input limit when it declares one (``max_length``, 256 for MiniLM).
        chunk_overlap: default ``chunk_size // 12`` (LightRAG's ratio).
        llm_timeout: seconds one request of the index's ``llm_runner`` may take (``None``: no
            limit); a request past it is retried like any failure, then the chunk is reported
            in ``extraction_report()`` ("timed out after N s") and stays indexed as text.
            Counted in ``llm_stats()["timeouts"]``. Retrieval's cue and HyDE calls go through
            the same runner; the final answer is llama-index's call to the answer LLM (set the
            timeout of its client). An extractor given its own ``LLMRunner`` keeps that one's.
        cache_dir: folder of the persistent LLM response cache; ``None`` keeps no disk cache.
            Give one to make an interrupted build resumable without repeating finished calls.
        combined: the default ``EntityEventExtractor``'s one call per chunk for entities and
            events instead of two passes.
        num_workers, max_retries: the runner's concurrent calls and retries per call.
        built_with: names the embedding the stored vectors were made with (the index's
            ``config["embed_model"]``), asked when the embedding is resolved: another warns.
        response_cache: the runner's cache instead of one in ``cache_dir`` (a Ray worker's
            in-memory copy of the driver's, ``ingest.ray_workers``).
    """

    def __init__(
        self,
        llm: Optional[LLM] = None,
        embed_model: Optional[BaseEmbedding] = None,
        extractors: Optional[Sequence[TransformComponent]] = None,
        chunk_size: Optional[int] = None,
        chunk_overlap: Optional[int] = None,
        combined: bool = False,
        num_workers: int = 4,
        max_retries: int = 3,
        llm_timeout: Optional[float] = 120.0,
        cache_dir: Optional[str] = None,
        built_with: Callable[[], Optional[str]] = lambda: None,
        response_cache: Optional[llm_runner.ResponseCache] = None,
    ) -> None:
        self._llm_arg = llm
        self._embed_model_arg = embed_model
        self._extractors_arg = list(extractors) if extractors is not None else None
        self._default_extractors: list[TransformComponent] = []
        self._chunk_size = chunk_size
        self._chunk_overlap = chunk_overlap
        self.combined = combined
        self._num_workers = num_workers
        self._max_retries = max_retries
        self._llm_timeout = llm_timeout
        self._cache_dir = cache_dir
        self._response_cache = response_cache
        self._built_with = built_with
        # guards the lazily built models, runner, extractors and splitter (first use may race)
        self._lock = threading.RLock()
        self._llm_resolved = False
        self._llm: Optional[LLM] = None
        self._runner: Optional[llm_runner.LLMRunner] = None
        self._embed_model: Optional[BaseEmbedding] = None
        self._splitter: Optional[SentenceSplitter] = None

    @property
    def llm(self) -> Optional[LLM]:
        """The LLM of extraction and answers, or ``None`` in the LLM-free setup."""
        if not self._llm_resolved:
            with self._lock:
                if not self._llm_resolved:
                    self._llm = llm_runner.resolve_llm(self._llm_arg)
                    self._llm_resolved = True
        return self._llm

    @property
    def llm_runner(self) -> Optional[llm_runner.LLMRunner]:
        """The retrying, caching door to ``llm`` (``None`` without an LLM); built once."""
        if self._runner is None and self.llm is not None:
            with self._lock:
                if self._runner is None:
                    cache_path = str(Path(self._cache_dir or ".") / "llm_cache.json")
                    cache = self._response_cache
                    if cache is None and self._cache_dir:
                        cache = llm_runner.ResponseCache(cache_path)
                    self._runner = llm_runner.LLMRunner(
                        self.llm,
                        cache=cache,
                        num_workers=self._num_workers,
                        max_retries=self._max_retries,
                        timeout=self._llm_timeout,
                    )
        return self._runner

    @property
    def runner_if_built(self) -> Optional[llm_runner.LLMRunner]:
        """The runner if something asked for it already (spending to sync), without building it."""
        return self._runner

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedding of every node kind (built once); warns if it differs from the build's."""
        if self._embed_model is None:
            with self._lock:
                if self._embed_model is None:
                    model = embeddings.resolve_embed_model(self._embed_model_arg)
                    built_with = self._built_with()
                    if built_with and built_with != model.model_name:
                        warnings.warn(
                            f"this index was embedded with {built_with!r} but "
                            f"{model.model_name!r} is in use; similarities will be meaningless. "
                            "Pass embed_model=... when loading.",
                            stacklevel=3,  # the caller of E2RAGIndex.embed_model
                        )
                    self._embed_model = model
        return self._embed_model

    def worker_settings(self) -> dict[str, Any]:
        """The keyword arguments another process builds the same models from (a Ray worker,
        ``ray_workers``): LLM and embedding resolved here, since the worker has not this
        process's ``Settings``; the runner, its cache and the default extractors are its own."""
        return dict(
            llm=self.llm,
            embed_model=self.embed_model,
            extractors=self._extractors_arg,
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            combined=self.combined,
            num_workers=self._num_workers,
            max_retries=self._max_retries,
            llm_timeout=self._llm_timeout,
        )

    def answer_llm(self, llm: Optional[LLM]) -> Optional[LLM]:
        """The LLM an engine answers with: ``llm`` when given (a ``NoLLM``: none, so extractive
        answers), else the index's."""
        return self.llm if llm is None else llm_runner.resolve_llm(llm)

    @property
    def chunk_size(self) -> int:
        """Tokens per chunk: the one given or stored, else the default capped by the embedding."""
        if self._chunk_size is None:
            with self._lock:
                if self._chunk_size is None:
                    self._chunk_size = default_chunk_size(self.embed_model)
        return self._chunk_size

    @property
    def chunk_overlap(self) -> int:
        if self._chunk_overlap is None:
            return default_chunk_overlap(self.chunk_size)
        return self._chunk_overlap

    @property
    def splitter(self) -> SentenceSplitter:
        if self._splitter is None:
            with self._lock:
                if self._splitter is None:
                    self._splitter = SentenceSplitter(
                        chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
                    )
        return self._splitter

    @property
    def extractors(self) -> list[TransformComponent]:
        """The chunk extractors: the ones given, else the defaults once a build chose them."""
        return list(self._extractors_arg or self._default_extractors)

    def resolve_extractors(self) -> list[TransformComponent]:
        """The extractors a build runs (the defaults chosen on first use, by the LLM's presence)."""
        if self._extractors_arg is not None:
            return self._extractors_arg
        with self._lock:
            if not self._default_extractors:
                runner = self.llm_runner
                if runner is not None:
                    extractor: TransformComponent = EntityEventExtractor(
                        llm_runner=runner, combined=self.combined
                    )
                else:
                    # spaCy's pipeline module (about a second): only for LLM-free builds
                    from llama_index_e2rag.extract.grounded import GroundedExtractor

                    extractor = GroundedExtractor()
                self._default_extractors = [extractor]
            return self._default_extractors
