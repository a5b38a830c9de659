"""Prompt texts fill exactly as their llama-index templates do, which are built on demand."""

from __future__ import annotations

import pytest
from llama_index.core.prompts import PromptTemplate

from llama_index_e2rag.llm import runner as llm

from llama_index_e2rag.llm import parsing as llm_parsing
from llama_index_e2rag.extract import prompts
from llama_index_e2rag.llm.prompt_text import fill, format_prompt

TEXTS = {
    "ENTITY_EXTRACTION_PROMPT": prompts.ENTITY_EXTRACTION_TEXT,
    "EVENT_EXTRACTION_PROMPT": prompts.EVENT_EXTRACTION_TEXT,
    "COMBINED_EXTRACTION_PROMPT": prompts.COMBINED_EXTRACTION_TEXT,
    "QUERY_CUE_PROMPT": prompts.QUERY_CUE_TEXT,
    "HYPOTHETICAL_ANSWER_PROMPT": prompts.HYPOTHETICAL_ANSWER_TEXT,
}
#: Values with braces of every kind: only the template's own placeholders may be filled.
VALUES = {
    "text": 'Harry wrote {query} and {"a": [1]} then }{ and {{text}}.',
    "query": "What is {text}?",
    "prompt": "{output}",
    "output": '{"events": []}',
    "error": "{error}",
    "schema": '{"type": "object"}',
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_each_prompt_is_its_text_as_a_template_filled_alike(name: str):
    template = getattr(prompts, name)
    assert isinstance(template, PromptTemplate) and template.get_template() == TEXTS[name]
    assert getattr(prompts, name) is template  # built once
    expected = template.format(**VALUES)
    assert fill(TEXTS[name], **VALUES) == expected
    assert format_prompt(TEXTS[name], **VALUES) == format_prompt(template, **VALUES) == expected


def test_the_repair_prompt_is_its_text_and_still_exported_by_llm():
    assert llm.JSON_REPAIR_PROMPT is llm_parsing.JSON_REPAIR_PROMPT
    assert llm.JSON_REPAIR_PROMPT.get_template() == llm_parsing.JSON_REPAIR_TEXT
    assert fill(llm_parsing.JSON_REPAIR_TEXT, **VALUES) == llm.JSON_REPAIR_PROMPT.format(**VALUES)


def test_placeholders_not_given_stay_as_written():
    assert fill("{a} {b} {a}", a="x") == "x {b} x"


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="NO_SUCH_PROMPT"):
        prompts.NO_SUCH_PROMPT  # noqa: B018
    with pytest.raises(ImportError):
        from llama_index_e2rag.llm.parsing import NO_SUCH_PROMPT  # noqa: F401
