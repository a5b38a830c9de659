"""SentGraph's anchor refinement with an LLM (paper 004, §3.2, prompt A.4): the model drops the
candidate evidence paths that are clearly irrelevant and says whether the rest suffices to
answer ("answer") or more evidence is needed ("expand").

Errors are raised, not handled: the retriever falls back to its rule-based refinement on
``LLMOutputError`` / ``LLMTimeoutError`` (the ``entity_event._cues`` pattern).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from llama_index_e2rag.extract.sentence_graph.prompts import (
    SENTGRAPH_REFINE,
    EvidencePath,
    RefineAnswer,
    format_paths,
)
from llama_index_e2rag.ranking.sentence_graph import Refinement

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner, PromptLike


async def llm_refine(
    runner: "LLMRunner",
    prompt: "PromptLike",
    question: str,
    candidates: Sequence[EvidencePath],
) -> Refinement:
    """The LLM's refinement of ``candidates``.

    Path numbers out of range are ignored; an answer keeping none of the candidates keeps them
    all, following the prompt's own rule "keep paths unless they are clearly irrelevant".
    """
    if not candidates:
        return Refinement((), "expand")
    answer = await runner.astructured(
        prompt,
        RefineAnswer,
        kind=SENTGRAPH_REFINE,
        question=question,
        indexed_paths=format_paths(candidates),
    )
    kept = {number - 1 for number in answer.keep if 1 <= number <= len(candidates)}
    keep = tuple(sorted(kept)) if kept else tuple(range(len(candidates)))
    return Refinement(keep, answer.action)
