"""The base of every retriever over ``Stores``: one retrieval sees one state of the store.

A retrieval reads the graph, the vectors and the chunks many times; a commit landing between two
of those reads would mix two states (a node found by search whose rows are gone, say). Each
``retrieve`` therefore holds the stores' read lock (``locks.py``): commits of this or another
process wait until it returns, and it waits for a commit under way.
"""

from __future__ import annotations

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryType

from llama_index_e2rag.stores import Stores


class StoresRetriever(BaseRetriever):
    """``BaseRetriever`` whose public calls run under the stores' read lock (subclasses set
    ``self._stores``)."""

    _stores: Stores

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        with self._stores.reading():
            return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        async with self._stores.areading():
            return await super().aretrieve(str_or_query_bundle)
