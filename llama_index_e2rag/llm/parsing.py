"""Structured output from plain text: JSON found in an answer, and one repair round.

Shared by ``llm.LLMRunner`` and ``lightrag_ext`` (which calls LightRAG's LLM functions), so both
packages accept and reject the same answers and ask for a repair the same way.

Parsing is bounded: an answer longer than ``MAX_OUTPUT_CHARS`` is refused unread, and no JSON value
nested deeper than ``MAX_JSON_DEPTH`` reaches ``json`` or pydantic (a linear scan measures the
depth first), so a runaway answer such as 5,000 ``[`` is an ordinary parse failure
(``OutputParseError``, an ``LLMOutputError``) that takes the repair round, never a
``RecursionError``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Optional, Type, TypeVar

from pydantic import BaseModel, ValidationError

from llama_index_e2rag.errors import LLMOutputError
from llama_index_e2rag.llm.prompt_text import fill, lazy_templates

if TYPE_CHECKING:
    from llama_index.core.prompts import PromptTemplate

Model = TypeVar("Model", bound=BaseModel)

JSON_REPAIR_TEXT = """---Task: json_repair---
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

#: ``JSON_REPAIR_TEXT`` as a llama-index template, built on first access
JSON_REPAIR_PROMPT: PromptTemplate
__getattr__ = lazy_templates(globals(), {"JSON_REPAIR_PROMPT": JSON_REPAIR_TEXT})

#: Longest answer parsed, in characters. An extraction answer for a 1,200-token chunk is a few KB
#: and models stop at 4k-16k output tokens (16k tokens are about 64 KB of JSON), so anything
#: longer is runaway output, refused before any scanning.
MAX_OUTPUT_CHARS = 256_000
#: Deepest JSON nesting parsed. Our schemas nest three levels (``{"events": [{"participants":
#: [...]}]}``); 64 leaves room for any sensible answer and stays far below Python's recursion
#: limit (``json``'s C scanner recurses once per level and raises ``RecursionError`` near 1,000).
MAX_JSON_DEPTH = 64
#: Most characters of a failed answer shown back to the LLM in the repair prompt.
MAX_REPAIR_ECHO = 16_000

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
#: What the depth scan looks at: a complete JSON string (as ``json`` reads one in strict mode: no
#: raw control characters), an opening or closing bracket, or a quote that starts no valid string.
_DEPTH_TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\\x00-\x1f]|\\.)*")|(?P<open>[\[{])|(?P<close>[\]}])|(?P<bad>")'
)


class OutputParseError(LLMOutputError, ValueError):
    """An answer held no usable JSON: none at all, invalid, the wrong shape, too large or nested
    too deeply. An ``LLMOutputError``; ``parse_with_repair`` answers it with the repair round, so
    its message is written for the LLM as much as for the log."""


def json_depth(text: str, start: int = 0, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep ``json`` would nest decoding the value that opens at ``text[start]``.

    A linear scan that reads strings the way ``json`` does (so brackets inside strings do not
    count) and stops where the value closes, where ``json`` would stop at an unterminated
    string, or as soon as the depth passes ``limit`` (then ``limit + 1`` is returned). Up to the
    first character ``json`` rejects, the scan and the decoder agree; past it the decoder is
    gone, so the result is never lower than the depth ``json`` reaches.
    """
    return _scan_value(text, start, limit)[0]


def _scan_value(text: str, start: int, limit: int) -> tuple[int, Optional[int]]:
    """``json_depth`` and the end (exclusive) of the value opening at ``start``, or None when
    it never closes, so ``json`` could not decode it."""
    depth = deepest = 0
    for token in _DEPTH_TOKEN.finditer(text, start):
        kind = token.lastgroup
        if kind == "open":
            depth += 1
            if depth > limit:
                return depth, None
            deepest = max(deepest, depth)
        elif kind == "close":
            depth -= 1
            if depth <= 0:
                return deepest, token.end()
        elif kind == "bad":
            break
    return deepest, None


def _json_candidates(text: str, max_depth: int = MAX_JSON_DEPTH) -> Iterator[Any]:
    """JSON values found in an answer: fenced blocks first, then every decodable '{' / '['.

    Lazy, so the first value that validates ends the search. Raises ``OutputParseError`` for a
    value nested deeper than ``max_depth`` before ``json`` sees it. With more brackets than
    ``max_depth`` each candidate is scanned first, and only the span the scan found is decoded
    (a value that never closes is skipped): ``json`` reports an error's line by counting from
    the start of its input, so decoding every bracket of a large answer in place would be
    quadratic.
    """
    decoder = json.JSONDecoder()
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for source in sources:
        # no more brackets than the limit: no value can be too deep, and few candidates
        shallow = source.count("[") + source.count("{") <= max_depth
        for match in re.finditer(r"[\[{]", source):
            start, end = match.start(), None
            if not shallow:
                deepest, end = _scan_value(source, start, max_depth)
                if deepest > max_depth:
                    raise OutputParseError(
                        f"the answer nests JSON more than {max_depth} levels deep; reply with "
                        "the flat structure the schema describes"
                    )
                if end is None:
                    continue
            try:
                if end is None:
                    value, _ = decoder.raw_decode(source, start)
                else:
                    value, _ = decoder.raw_decode(source[start:end])
            except RecursionError as exc:  # not reachable after the depth scan; kept as a guard
                raise OutputParseError("the answer's JSON is nested too deeply to parse") from exc
            except ValueError:
                continue
            yield value


def parse_json_output(
    text: str,
    output_cls: Type[Model],
    *,
    max_chars: int = MAX_OUTPUT_CHARS,
    max_depth: int = MAX_JSON_DEPTH,
) -> Model:
    """The first JSON value in ``text`` that validates as ``output_cls``.

    Tolerates prose and code fences around the JSON, and a bare list for a model with a single
    list field (``[...]`` for ``{"entities": [...]}``). Objects sharing no key with the model are
    skipped rather than read as an all-defaults (empty) answer.

    Raises ``OutputParseError`` (an ``LLMOutputError``) when nothing validates, and before any
    parsing when ``text`` is longer than ``max_chars`` or a JSON value in it nests deeper than
    ``max_depth``.
    """
    if len(text) > max_chars:
        raise OutputParseError(
            f"the answer is {len(text):,} characters long, more than the {max_chars:,} accepted; "
            "reply with the JSON object only"
        )
    list_fields = [
        name
        for name, info in output_cls.model_fields.items()
        if getattr(info.annotation, "__origin__", None) is list
    ]
    first_error: Optional[str] = None
    found = False
    for value in _json_candidates(text, max_depth):
        found = True
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
    if not found:
        raise OutputParseError("the answer contains no JSON object")
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

    If the answer does not parse, ``ask`` is sent ``JSON_REPAIR_TEXT`` (the original prompt,
    the answer and what was wrong with it) and its reply is parsed instead. Returns the model and
    the answer text it came from (what a caller caches). Raises ``LLMOutputError`` naming
    ``what`` (e.g. "entity_extraction") when the repaired answer does not parse either. Every
    parse failure (``OutputParseError``: no JSON, invalid, wrong shape, too large, too deep)
    takes the repair round; an answer longer than ``MAX_REPAIR_ECHO`` is shown back cut.
    """
    try:
        return parse_json_output(answer, output_cls), answer
    except OutputParseError as first_error:
        shown = answer
        if len(answer) > MAX_REPAIR_ECHO:
            cut = len(answer) - MAX_REPAIR_ECHO
            shown = f"{answer[:MAX_REPAIR_ECHO]}\n[... {cut:,} more characters]"
        repair = fill(
            JSON_REPAIR_TEXT,
            prompt=prompt,
            output=shown,
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
