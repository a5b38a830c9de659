"""OFFLINE STAND-IN for a language model, so the LightRAG example runs without an API key.

THIS IS NOT A LANGUAGE MODEL. LightRAG's stock pipeline needs an LLM for four things, and this
stand-in answers each from the text in the prompt with spaCy (``en-core-web-sm``, installed with
the ``[offline]`` extra), so the example's steps can be watched end to end offline:

- LightRAG's entity/relation extraction: spaCy's named entities, one relation per pair of names
  sharing a sentence;
- our event pass (``---Task: event_extraction---``) and fallback mention pass: one event per
  sentence that names someone, with those names as participants;
- LightRAG's keyword step and our query cues: the names in the question;
- the answer: the context sentence sharing most words with the question, marked as extracted.

With a real LLM (set ``OPENAI_API_KEY``, or pass your LightRAG LLM function) none of this runs.
Embeddings offline are the package's MiniLM int8 ONNX model (``[offline]`` extra), and tokens are
words (``lightrag_ext.word_tokenizer``: LightRAG's default, tiktoken, downloads its vocabulary).
"""
# not-an-example: the LLM stand-in lightrag_extend_existing.py imports


from __future__ import annotations

import json
import re
from typing import Any, Optional

import numpy as np
from lightrag.prompt import PROMPTS
from lightrag.utils import EmbeddingFunc

from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.grounded import load_spacy

TUPLE = PROMPTS["DEFAULT_TUPLE_DELIMITER"]
COMPLETE = PROMPTS["DEFAULT_COMPLETION_DELIMITER"]
NAME_LABELS = {"PERSON": "Person", "ORG": "Organization", "GPE": "Location", "LOC": "Location"}
ANSWER_NOTE = "[offline stand-in: the context's best-matching sentence, not a generated answer]"
_TASK = re.compile(r"^---Task: (\w+)---", re.MULTILINE)


def _input_text(prompt: str) -> str:
    """The passage of an extraction prompt (ours: after ``---Input Text---``; LightRAG's: the
    fenced block)."""
    if "```" in prompt:
        return prompt.split("```")[-2].strip()
    return prompt.split("---Input Text---", 1)[-1].split("---Output---", 1)[0].strip()


def _names(sentence: Any) -> list[tuple[str, str]]:
    found = [(e.text, NAME_LABELS[e.label_]) for e in sentence.ents if e.label_ in NAME_LABELS]
    return list(dict.fromkeys(found))


class OfflineStandIn:
    """A LightRAG LLM function (``await f(prompt, system_prompt=..., **kwargs) -> str``)."""

    def __deepcopy__(self, memo: dict) -> "OfflineStandIn":
        return self  # LightRAG deep-copies its configuration

    async def __call__(self, prompt: str, system_prompt: Optional[str] = None, **_: Any) -> str:
        task = _TASK.search(prompt)
        if task:
            return self._shared_task(task.group(1), prompt)
        if "---Input Text---" in prompt and "Extract entities and relationships" in prompt:
            return self._lightrag_entities(_input_text(prompt))
        if "missed or incorrectly formatted entities" in prompt:
            return COMPLETE  # LightRAG's gleaning round: nothing more
        if "User Query:" in prompt and "keywords" in prompt:
            names = self._query_names(prompt.rsplit("User Query:", 1)[1].split("\n")[0])
            return json.dumps({"high_level_keywords": [], "low_level_keywords": names})
        return self._answer(prompt, system_prompt or "")

    def _lightrag_entities(self, text: str) -> str:
        rows, seen = [], set()
        for sentence in load_spacy()(text).sents:
            names, said = _names(sentence), sentence.text.strip()
            for name, label in names:
                if name not in seen:
                    seen.add(name)
                    rows.append(TUPLE.join(["entity", name, label, said]))
            for (a, _), (b, _) in zip(names, names[1:]):
                rows.append(TUPLE.join(["relation", a, b, "together", said]))
        return "\n".join(rows + [COMPLETE])

    def _shared_task(self, kind: str, prompt: str) -> str:
        if kind == "query_cues":
            return json.dumps({"entities": self._query_names(prompt), "events": []})
        sentences = list(load_spacy()(_input_text(prompt)).sents)
        if kind == "entity_extraction":
            found = {n: (t, s.text.strip()) for s in sentences for n, t in _names(s)}
            entities = [{"name": n, "type": t, "description": d} for n, (t, d) in found.items()]
            return json.dumps({"entities": entities})
        events = [
            {
                "title": " ".join(s.text.split()[:6]),
                "description": s.text.strip(),
                "participants": [n for n, _ in _names(s)],
                "date": None,
            }
            for s in sentences
            if _names(s)
        ]
        return json.dumps({"events": events})

    @staticmethod
    def _query_names(text: str) -> list[str]:
        return [e.text for e in load_spacy()(text).ents if e.label_ in NAME_LABELS]

    @staticmethod
    def _answer(question: str, system_prompt: str) -> str:
        words = {t.lemma_.lower() for t in load_spacy()(question) if t.is_alpha and not t.is_stop}
        best, overlap = "", -1
        for sentence in load_spacy()(system_prompt).sents:
            shared = len(words & {t.lemma_.lower() for t in sentence if t.is_alpha})
            if shared > overlap and len(sentence.text.split()) > 3:
                best, overlap = sentence.text.strip(), shared
        return f"{best}\n{ANSWER_NOTE}"


def offline_embedding() -> EmbeddingFunc:
    """The package's MiniLM (int8 ONNX, 384 dimensions) as a LightRAG embedding function."""
    model = MiniLMEmbedding()

    async def embed(texts: list[str], **_: Any) -> np.ndarray:
        return np.asarray(model.embed(texts), dtype=np.float32)

    return EmbeddingFunc(
        embedding_dim=model.dimension, func=embed, max_token_size=512, model_name="minilm-int8"
    )
