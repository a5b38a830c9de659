"""llm_parsing: bounded parsing of LLM answers (size, nesting depth) and the repair round."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from llama_index_e2rag.errors import LLMOutputError
from llama_index_e2rag.extract.prompts import EntityExtraction, EventExtraction, QueryCues
from llama_index_e2rag.llm.parsing import (
    MAX_JSON_DEPTH,
    MAX_OUTPUT_CHARS,
    MAX_REPAIR_ECHO,
    OutputParseError,
    json_depth,
    parse_json_output,
    parse_with_repair,
)

DEEP = 5_000


class Loose(BaseModel):
    data: Any = None


def nested(depth: int) -> str:
    """``{"data": [[...]]}`` with the list ``depth - 1`` levels deep (``depth`` in all)."""
    return '{"data": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_json_depth_reads_strings_as_json_does():
    assert json_depth('{"a": "[[[[{{", "b": [[1], {"c": "]]]"}]}') == 3
    assert json_depth('["\\"[[[", [2]]') == 2  # an escaped quote does not end the string
    assert json_depth("[1] [[[[[[") == 1  # the value ends at its closing bracket
    assert json_depth('["unterminated [[[[[[') == 1  # json stops at the bad string, so do we
    assert json_depth("[" * DEEP) == MAX_JSON_DEPTH + 1  # stops counting past the limit
    assert json_depth("[" * 10, limit=3) == 4
    text = 'Answer: {"x": [1, 2]} and more'
    assert json_depth(text, text.index("{")) == 2


@pytest.mark.parametrize(
    "answer",
    [
        "[" * DEEP,
        '{"entities": ' * DEEP,
        "[" * DEEP + "]" * DEEP,  # valid JSON, just too deep
        '["x", ' * DEEP,
        'He said "look [' + "[" * DEEP,  # an unbalanced quote in the prose before it
        '"' + "[" * DEEP,
        '["\\"]", ' + "[" * DEEP,  # a bracket and an escaped quote inside a string first
        "```json\n" + "[" * DEEP + "\n```",
        "Entities: " + "{" * DEEP,
    ],
)
def test_deeply_nested_answers_are_parse_errors_not_recursion_errors(answer: str):
    for output_cls in (EntityExtraction, EventExtraction, QueryCues, Loose):
        with pytest.raises(OutputParseError, match=f"more than {MAX_JSON_DEPTH} levels deep"):
            parse_json_output(answer, output_cls)


def test_depth_limit_is_exact_and_brackets_inside_strings_do_not_count():
    assert parse_json_output(nested(MAX_JSON_DEPTH), Loose).data is not None
    with pytest.raises(OutputParseError, match="levels deep"):
        parse_json_output(nested(MAX_JSON_DEPTH + 1), Loose)
    name = "[" * (3 * MAX_JSON_DEPTH)
    answer = '{"entities": [{"name": "' + name + '", "type": "Other"}]}'
    assert parse_json_output(answer, EntityExtraction).entities[0].name == name


def test_json_after_many_bracketed_asides_is_still_found():
    """Past ``MAX_JSON_DEPTH`` brackets each candidate is scanned and decoded as a slice."""
    asides = 'see [note] and {"not": "it"}, ' * (2 * MAX_JSON_DEPTH)
    answer = asides + 'Answer: {"entities": [{"name": "Ron"}]} [trailing'
    assert parse_json_output(answer, EntityExtraction).entities[0].name == "Ron"
    fenced = asides + '```json\n[{"name": "Hermione"}]\n```'
    assert parse_json_output(fenced, EntityExtraction).entities[0].name == "Hermione"


def test_answers_longer_than_the_cap_are_refused_before_parsing():
    good = '{"entities": [{"name": "Ron"}]}'
    assert parse_json_output(good, EntityExtraction).entities[0].name == "Ron"
    padded = good + " " * MAX_OUTPUT_CHARS
    with pytest.raises(OutputParseError, match="characters long"):
        parse_json_output(padded, EntityExtraction)
    with pytest.raises(OutputParseError, match="more than the 10 accepted"):
        parse_json_output(good, EntityExtraction, max_chars=10)


def test_every_parse_failure_is_an_llm_output_error():
    failures = ["no JSON here", '{"count": ', '{"entities": "many"}', "[" * DEEP, "x" * 300_000]
    for answer in failures:
        with pytest.raises(LLMOutputError) as caught:
            parse_json_output(answer, EntityExtraction)
        assert isinstance(caught.value, (OutputParseError, ValueError))


async def test_a_too_deep_answer_takes_the_repair_round():
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return '{"entities": [{"name": "Ron"}]}'

    parsed, text = await parse_with_repair(
        "[" * DEEP, EntityExtraction, prompt="ORIGINAL", ask=ask, what="entity_extraction"
    )
    assert [e.name for e in parsed.entities] == ["Ron"] and text.startswith('{"entities"')
    assert len(asked) == 1 and "levels deep" in asked[0] and "ORIGINAL" in asked[0]

    async def deep_again(prompt: str) -> str:
        asked.append(prompt)
        return "[" * DEEP

    with pytest.raises(LLMOutputError, match="even after one repair round.*levels deep"):
        await parse_with_repair(
            "[" * DEEP, EntityExtraction, prompt="P", ask=deep_again, what="entity_extraction"
        )
    assert len(asked) == 2


async def test_a_huge_answer_is_shown_back_cut():
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return '{"entities": []}'

    huge = "word " * (MAX_OUTPUT_CHARS // 4)
    await parse_with_repair(huge, EntityExtraction, prompt="P", ask=ask, what="x")
    (repair,) = asked
    assert "characters long" in repair and "more characters]" in repair
    assert len(repair) < MAX_REPAIR_ECHO + 5_000 < len(huge)
