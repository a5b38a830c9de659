"""The offline MiniLM embedding (real int8 ONNX model) and the embedding resolution order."""

from __future__ import annotations

import asyncio
import copy
import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from llama_index.core import Settings

from llama_index_e2rag.embeddings import (
    MINILM_MODEL_NAME,
    TOKENIZER_PATH,
    MiniLMEmbedding,
    resolve_embed_model,
)
from llama_index_e2rag import embeddings
from llama_index_e2rag.errors import MissingModelError

from hash_embedding import HashEmbedding


def cos(a, b) -> float:
    return float(np.dot(a, b))


def test_vectors_are_unit_length_384_dims(minilm):
    vectors = minilm.get_text_embedding_batch(["Holmes lit his pipe.", "", "Watson"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.model_name == MINILM_MODEL_NAME
    assert minilm.embed([]).shape == (0, 384)


def test_similarities_match_published_all_minilm_l6_v2_values(minilm):
    # sentence-transformers' quickstart prints 0.6660 / 0.1046 / 0.1411 for the fp32 model
    v = minilm.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert cos(v[0], v[1]) == pytest.approx(0.6660, abs=0.02)
    assert cos(v[0], v[2]) == pytest.approx(0.1046, abs=0.02)
    assert cos(v[1], v[2]) == pytest.approx(0.1411, abs=0.02)


def test_paraphrase_outranks_unrelated_sentence(minilm):
    food, bread, drums = minilm.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "A monkey is playing drums."]
    )
    assert cos(food, bread) > 0.7
    assert cos(food, bread) > cos(food, drums) + 0.5


def test_batching_and_padding_do_not_change_vectors(minilm):
    short = "Holmes smiled."
    long = " ".join(["Watson waited in the rain outside the house on Baker Street."] * 5)
    alone = minilm.get_text_embedding(short)
    batch = minilm.get_text_embedding_batch([long, short, "A cab.", long + " again"])
    assert np.allclose(batch[1], alone, atol=1e-5)  # padding is masked out of the mean
    assert np.allclose(minilm.get_query_embedding(short), alone)
    assert np.allclose(minilm.get_text_embedding(long), batch[0], atol=1e-5)  # input order kept


def test_released_runtimes_are_loaded_again_and_give_the_same_vectors(minilm):
    """``release_runtimes`` drops the cached session (its memory can go); the next embedding
    loads it again and returns the very same vectors."""
    texts = ["Madame de Merret swore on the crucifix.", "The mason walled up the closet door."]
    before = minilm.embed(texts)
    session = minilm._runtime().session
    embeddings.release_runtimes()
    assert not embeddings._RUNTIMES
    assert np.array_equal(minilm.embed(texts), before)
    assert minilm._runtime().session is not session


def test_same_text_gives_same_vector(minilm):
    text = "The speckled band was a swamp adder."
    assert minilm.get_text_embedding(text) == minilm.get_text_embedding(text)


def test_texts_are_read_up_to_256_word_pieces_and_cut_after(minilm):
    cats = " ".join(["cat"] * 150)  # one word piece each
    within = minilm.embed([cats, cats + " " + " ".join(["ship"] * 90)])
    assert cos(within[0], within[1]) < 0.99  # pieces 151-240 still count
    long = " ".join(["cat"] * 300)
    beyond = minilm.embed([long, long + " and a completely different ending about ships"])
    assert np.allclose(beyond[0], beyond[1], atol=1e-6)  # the ending lies past 256 pieces
    short = MiniLMEmbedding(max_length=8)
    x, y = short.embed(["one two three four five six", "one two three four five six seven"])
    assert np.allclose(x, y, atol=1e-6)


async def test_async_variants_match_sync(minilm):
    texts = ["Holmes lit his pipe.", "Watson opened the window."]
    assert np.allclose(await minilm.aget_text_embedding_batch(texts), minilm.embed(texts))
    assert np.allclose(await minilm.aget_query_embedding(texts[0]), minilm.embed(texts[:1])[0])


def test_concurrent_threads_get_consistent_results(minilm):
    texts = [f"Sentence number {i} about the red-headed league." for i in range(12)]
    expected = minilm.embed(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: minilm.get_text_embedding(t), texts))
    assert np.allclose(results, expected, atol=1e-5)


def test_model_is_copyable_after_use(minilm):
    minilm.embed(["warm"])
    clone = copy.deepcopy(minilm)
    assert np.allclose(clone.embed(["warm"]), minilm.embed(["warm"]))


def test_missing_model_file_is_a_clear_error(tmp_path):
    broken = MiniLMEmbedding(model_path=str(tmp_path / "missing.onnx"))
    with pytest.raises(MissingModelError, match="missing.onnx"):
        broken.get_text_embedding("x")


def test_bundled_tokenizer_is_the_unmodified_file_named_in_the_notice():
    notice = (TOKENIZER_PATH.parent / "NOTICE-minilm.txt").read_text(encoding="utf-8")
    digest = hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest()
    assert f"sha256: {digest}" in notice


def test_resolve_prefers_explicit_model(hash_embed, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", MiniLMEmbedding())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert resolve_embed_model(hash_embed) is hash_embed


def test_resolve_uses_user_settings_before_environment(hash_embed, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", hash_embed)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert resolve_embed_model() is hash_embed


def test_resolve_uses_openai_when_keyed_without_calling_it(monkeypatch):
    from llama_index.embeddings.openai import OpenAIEmbedding

    monkeypatch.setattr(Settings, "_embed_model", None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_embed_model()
    assert isinstance(model, OpenAIEmbedding)
    assert model.model_name == "text-embedding-3-small"


def test_resolve_defaults_to_offline_minilm(monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", None)
    model = resolve_embed_model()
    assert isinstance(model, MiniLMEmbedding)
    assert Settings._embed_model is None  # asking never installs llama-index's own default


def test_resolve_rejects_non_embeddings():
    with pytest.raises(TypeError):
        resolve_embed_model("local")  # type: ignore[arg-type]


def test_runs_are_bounded_by_padded_word_pieces(minilm):
    """Long texts go in small runs (memory), short ones in large runs (speed); vectors unchanged."""
    capped = minilm.model_copy(update={"run_batch_tokens": 64, "run_batch_size": 8})
    texts = ["short one", "a bit longer text here", "word " * 40, "word " * 30, "tiny"]
    runtime = capped._runtime()
    ids = [capped._truncate(e.ids) for e in runtime.tokenizer.encode_batch(texts)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    blocks = capped._blocks(order, ids)
    assert sorted(i for block in blocks for i in block) == list(range(len(texts)))
    for block in blocks:
        width = max(len(ids[i]) for i in block)
        assert len(block) == 1 or len(block) * width <= 64
        assert len(block) <= 8
    assert np.allclose(capped.embed(texts), minilm.embed(texts), atol=1e-5)


class CallCounting(HashEmbedding):
    """Records the size of every batch call."""

    calls: list[int] = []

    async def aget_text_embedding_batch(self, texts, show_progress=False, **kwargs):
        self.calls.append(len(texts))
        return await super().aget_text_embedding_batch(texts, show_progress, **kwargs)


@pytest.mark.parametrize("extra", [0, 2])
def test_rows_fill_one_matrix_a_call_at_a_time(monkeypatch, extra):
    model = CallCounting(calls=[])
    monkeypatch.setattr(embeddings, "EMBED_CALL_TEXTS", 3)
    texts = [f"text number {k} of the story" for k in range(10)]
    rows = asyncio.run(embeddings.aembed_rows(model, texts, rows=len(texts) + extra))
    assert rows.dtype == np.float32 and rows.shape == (len(texts) + extra, model.dim)
    assert model.calls == [3, 3, 3, 1]
    expected = np.asarray(model.get_text_embedding_batch(texts), np.float32)
    assert np.array_equal(rows[: len(texts)], expected)
