"""Offline fakes for LightRAG: scripted LLM function, hash embedding, word tokenizer.

LightRAG calls its LLM as ``await f(prompt, system_prompt=..., history_messages=..., **kwargs)``.
``ScriptedLightRAGLLM`` answers LightRAG's own prompts in LightRAG's own formats (tuple-delimited
entity/relation rows, keyword JSON, a fixed answer) from the text inside the prompt, and hands
our shared prompts (``---Task: <kind>---`` header: event extraction, entity extraction, query
cues) to the team's ``ScriptedLLM``, so one fake answers the shared prompts in both packages.
"""

from __future__ import annotations

import json
import re
from typing import Any, AsyncIterator, Optional

import numpy as np
from hash_embedding import hash_vector
from lightrag.prompt import PROMPTS
from lightrag.utils import EmbeddingFunc, Tokenizer
from scripted_llm import ScriptedLLM

from lightrag_ext.word_tokenizer import word_tokenizer

TUPLE = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
COMPLETE = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
ANSWER_PREFIX = "SCRIPTED ANSWER"
EMBED_DIM = 256

_TASK = re.compile(r"^---Task: (\w+)---", re.MULTILINE)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


def offline_tokenizer() -> Tokenizer:
    return word_tokenizer()


async def _hash_embed(texts: list[str], **_: Any) -> np.ndarray:
    return np.array([hash_vector(t, EMBED_DIM) for t in texts], dtype=np.float32)


def hash_embedding_func() -> EmbeddingFunc:
    return EmbeddingFunc(
        embedding_dim=EMBED_DIM, func=_hash_embed, max_token_size=8192, model_name="hash-256"
    )


class ScriptedLightRAGLLM:
    """LightRAG LLM function scripted from the prompt text; records every call by kind."""

    def __init__(self, shared: ScriptedLLM) -> None:
        self.shared = shared
        self.calls: list[tuple[str, str]] = []
        self.system_prompts: list[Optional[str]] = []

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]

    def __deepcopy__(self, memo: dict) -> "ScriptedLightRAGLLM":
        return self  # LightRAG deep-copies its config (dataclasses.asdict); share the recorder

    async def __call__(
        self,
        prompt: str,
        system_prompt: Optional[str] = None,
        history_messages: Optional[list[dict[str, str]]] = None,
        **kwargs: Any,
    ) -> str | AsyncIterator[str]:
        self.system_prompts.append(system_prompt)
        task = _TASK.search(prompt)
        if task:
            self.calls.append((task.group(1), prompt))
            return (await self.shared.acomplete(prompt)).text
        if "---Input Text---" in prompt and "Extract entities and relationships" in prompt:
            self.calls.append(("lightrag_extract", prompt))
            return self._entities(prompt.split("```")[-2].strip())
        if "missed or incorrectly formatted entities" in prompt:
            self.calls.append(("lightrag_glean", prompt))
            return COMPLETE
        if "User Query:" in prompt and "keywords" in prompt:
            self.calls.append(("lightrag_keywords", prompt))
            return self._keywords(prompt.rsplit("User Query:", 1)[1].split("\n")[0])
        self.calls.append(("lightrag_answer", prompt))
        text = f"{ANSWER_PREFIX}: {prompt.strip()}"
        return _pieces(text) if kwargs.get("stream") else text

    def _entities(self, text: str) -> str:
        """Tuple rows: the shared fake's entities of the text (same names and descriptions as
        it gives our entity prompt), one relation per pair of names sharing a sentence."""
        entities = self.shared.entities_of(text)
        rows = [
            f"entity{TUPLE}{e['name']}{TUPLE}{e['type']}{TUPLE}{e['description']}"
            for e in entities
        ]
        names = [e["name"] for e in entities]
        for sentence in (s.strip() for s in _SENTENCE.findall(text)):
            present = [n for n in names if n in sentence]
            for src, tgt in zip(present, present[1:]):
                rows.append(f"relation{TUPLE}{src}{TUPLE}{tgt}{TUPLE}together{TUPLE}{sentence}")
        return "\n".join(rows + [COMPLETE])

    def _keywords(self, query: str) -> str:
        cues = self.shared.cues_of(query)
        return json.dumps(
            {"high_level_keywords": cues["events"], "low_level_keywords": cues["entities"]}
        )



async def _pieces(text: str) -> AsyncIterator[str]:
    """A streamed answer: the text in word-sized pieces that join back to it."""
    words = text.split(" ")
    for i, word in enumerate(words):
        yield word if i == len(words) - 1 else word + " "


async def stop_workers(rag: Any) -> None:
    """Stop LightRAG's LLM/embedding queue workers (finalize_storages leaves them running, and
    they would complain about the closed event loop at exit)."""
    wrapped = [state.wrapped for state in rag._role_llm_states.values()]
    for func in wrapped + [rag.embedding_func.func]:
        shutdown = getattr(func, "shutdown", None)
        if callable(shutdown):
            await shutdown(graceful=True)
