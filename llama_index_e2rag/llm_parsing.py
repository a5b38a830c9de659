"""Structured output from plain text: JSON found in an answer, and one repair round.

Shared by ``llm.LLMRunner`` and ``lightrag_ext`` (which calls LightRAG's LLM functions), so both
packages accept and reject the same answers and ask for a repair the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable, Optional, Type, TypeVar

from llama_index.core.prompts import PromptTemplate
from pydantic import BaseModel, ValidationError

from llama_index_e2rag.errors import LLMOutputError

Model = TypeVar("Model", bound=BaseModel)

JSON_REPAIR_PROMPT = PromptTemplate(
    """---Task: json_repair---
Your previous answer to the task below could not be used.

---Original task---
{prompt}
---Your answer---
{output}
---Problem---
{error}
---Instructions---
Answer the original task again. Reply with exactly one JSON object that follows this JSON schema, \
with no prose and no code fences:
{schema}
"""
)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class OutputParseError(ValueError):
    """Internal: an answer held no JSON matching the output model (message goes to the repair)."""


def _json_candidates(text: str) -> list[Any]:
    """JSON values found in an answer: fenced blocks first, then every decodable '{' / '['."""
    decoder = json.JSONDecoder()
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    values: list[Any] = []
    for source in sources:
        for match in re.finditer(r"[\[{]", source):
            try:
                value, _ = decoder.raw_decode(source, match.start())
            except ValueError:
                continue
            values.append(value)
    return values


def parse_json_output(text: str, output_cls: Type[Model]) -> Model:
    """The first JSON value in ``text`` that validates as ``output_cls``.

    Tolerates prose and code fences around the JSON, and a bare list for a model with a single
    list field (``[...]`` for ``{"entities": [...]}``). Objects sharing no key with the model are
    skipped rather than read as an all-defaults (empty) answer.
    """
    candidates = _json_candidates(text)
    if not candidates:
        raise OutputParseError("the answer contains no JSON object")
    list_fields = [
        name
        for name, info in output_cls.model_fields.items()
        if getattr(info.annotation, "__origin__", None) is list
    ]
    first_error: Optional[str] = None
    for value in candidates:
        if isinstance(value, list) and len(list_fields) == 1:
            value = {list_fields[0]: value}
        if isinstance(value, dict) and not value.keys() & output_cls.model_fields.keys():
            # e.g. a schema echoed back: it would validate as all-defaults, i.e. as "nothing"
            first_error = first_error or f"no JSON object has the keys of {output_cls.__name__}"
            continue
        try:
            return output_cls.model_validate(value)
        except ValidationError as exc:
            first_error = first_error or str(exc)
    raise OutputParseError(f"the JSON does not match {output_cls.__name__}: {first_error}")


async def parse_with_repair(
    answer: str,
    output_cls: Type[Model],
    *,
    prompt: str,
    ask: Callable[[str], Awaitable[str]],
    what: str,
) -> tuple[Model, str]:
    """``answer`` (the LLM's reply to ``prompt``) parsed as ``output_cls``, repairing once.

    If the answer does not parse, ``ask`` is sent ``JSON_REPAIR_PROMPT`` (the original prompt,
    the answer and what was wrong with it) and its reply is parsed instead. Returns the model and
    the answer text it came from (what a caller caches). Raises ``LLMOutputError`` naming
    ``what`` (e.g. "entity_extraction") when the repaired answer does not parse either.
    """
    try:
        return parse_json_output(answer, output_cls), answer
    except OutputParseError as first_error:
        repair = JSON_REPAIR_PROMPT.format(
            prompt=prompt,
            output=answer,
            error=str(first_error),
            schema=json.dumps(output_cls.model_json_schema()),
        )
    repaired = await ask(repair)
    try:
        return parse_json_output(repaired, output_cls), repaired
    except OutputParseError as second_error:
        raise LLMOutputError(
            f"The LLM's {what} answer could not be parsed as {output_cls.__name__}, even after "
            f"one repair round: {second_error}. Answer began: {repaired[:200]!r}. Try a stronger "
            "model or a function-calling one."
        ) from second_error
