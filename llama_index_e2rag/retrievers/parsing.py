"""The question parser of the LLM-free retrievers: the pipeline that built the index's graph."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from llama_index_e2rag.extract.grounded import GroundedExtractor


def extractors_parser(extractors: Optional[Iterable[Any]]) -> GroundedExtractor:
    """The index's own GroundedExtractor (the pipeline that built its graph), else a new one.

    Retrievers parse questions with it so a question is read the way the documents were.
    """
    for extractor in extractors or ():
        if isinstance(extractor, GroundedExtractor):
            return extractor
    return GroundedExtractor()
