"""The per-state node-embedding cache knows which of its matrices was read from its file (the
one its search serves) rather than guessing it from the variant and α."""

from __future__ import annotations

import numpy as np

from llama_index_e2rag.stores.grounded_layout import GroundedLayout
from llama_index_e2rag.stores.grounded_matrix import DEFAULT_ALPHA
from llama_index_e2rag.stores.node_embeddings import NodeEmbeddingCache, basic_embeddings

VECTORS = {"a": [1.0, 0.0], "b": [0.0, 1.0], "t": [0.6, 0.8]}
LAYOUT = GroundedLayout(
    node_ids=["a", "b"], indptr=np.array([0, 1, 1]), indices=np.array([0]), text_ids=["t"],
    sources=np.array([0, 1]), targets=np.array([1, 0]), units=np.array([0, 1]),
    text_groups=np.array([0]), text_lengths=np.array([5]),
)


def _vectors(ids):
    return np.asarray([VECTORS[i] for i in ids], np.float32).reshape(len(ids), 2)


def _derived(alpha: float) -> np.ndarray:
    return basic_embeddings(_vectors(LAYOUT.node_ids), LAYOUT.indptr, LAYOUT.indices,
                            _vectors(LAYOUT.text_ids), alpha)


def test_a_matrix_derived_in_memory_is_never_taken_for_the_files():
    cache = NodeEmbeddingCache("state", LAYOUT, _vectors)
    assert np.array_equal(cache.matrix("basic", DEFAULT_ALPHA, 0.0), _derived(DEFAULT_ALPHA))
    assert not cache.is_persisted("basic", DEFAULT_ALPHA)


def test_the_matrix_read_from_the_file_is_known_as_such():
    persisted = _derived(DEFAULT_ALPHA)
    cache = NodeEmbeddingCache("state", LAYOUT, _vectors, persisted)
    assert cache.is_persisted("basic", DEFAULT_ALPHA)
    assert cache.matrix("basic", DEFAULT_ALPHA, 0.7) is persisted  # β does not change basic
    assert not cache.is_persisted("basic", 0.3)
    assert not cache.is_persisted("neighbor", DEFAULT_ALPHA)
    assert np.array_equal(cache.matrix("basic", 0.3, 0.0), _derived(0.3))
    assert not cache.is_persisted("basic", 0.3)  # derived and kept: still not the file's
