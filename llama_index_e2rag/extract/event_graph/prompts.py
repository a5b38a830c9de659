"""Prompts and output models of E²GraphRAG's LLM calls (paper 001, appendix D, figures 6-8).

The role, goal, definitions and steps of the three prompts are the paper's, word for word,
except the output parts: figure 6 asks for LightRAG-style delimited tuples and figure 7 for an
answer followed by a JSON block; we ask for one JSON object (figure 6, parsed by
``LLMRunner.astructured``) and for the answer followed by a JSON block (figure 7, as in the
paper, parsed by ``parse_decomposition``). Those output sections are **our wording**. Every text
starts with a ``---Task: <kind>---`` header (the project's convention: logs, cache keys and the
scripted test LLM tell the calls apart by it). The paper's ``{tuple_delimiter}`` /
``{record_delimiter}`` placeholders go with the tuple format.

The validators are lenient about form (null, a bare string for a list, "NONE" or "unknown" for
a date) and drop items that cannot be read, so one bad item does not cost the whole answer.
The ``*_PROMPT`` llama-index templates are built on first access, so importing this module does
not import llama-index.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, Field, field_validator

from llama_index_e2rag.llm.parsing import parse_json_output
from llama_index_e2rag.llm.prompt_text import lazy_templates

if TYPE_CHECKING:
    from llama_index.core.prompts import PromptTemplate

EVENTGRAPH_UPDATE = "eventgraph_update"
EVENTGRAPH_DECOMPOSE = "eventgraph_decompose"
EVENTGRAPH_ENRICH = "eventgraph_enrich"

_ISO_DATE = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?(?:\s*/\s*\d{4}(?:-\d{2}(?:-\d{2})?)?)?")


def _text(value: Any) -> str:
    """A one-line string from whatever the LLM put there (None and non-strings included)."""
    return " ".join(str(value if value is not None else "").split())


def _date(value: Any) -> Optional[str]:
    """An ISO-8601 date or range as written, None for "NONE", "unknown" and non-dates."""
    match = _ISO_DATE.fullmatch(_text(value))
    return match.group(0).replace(" ", "") if match else None


def _strings(value: Any) -> list[str]:
    """A list of non-empty one-line strings from a list or a single string."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    return [text for text in (_text(item) for item in items) if text]


def _objects(value: Any) -> list[dict[str, Any]]:
    """The dict items of a list (a lone object counts as a list of one)."""
    if isinstance(value, dict):
        value = [value]
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class UpdatedEvent(BaseModel):
    """A known event the text adds details to: its title as listed, the new title and the merged
    description."""

    original_title: str
    title: str = ""
    description: str = ""
    date: Optional[str] = None

    _texts = field_validator("original_title", "title", "description", mode="before")(_text)
    _date = field_validator("date", mode="before")(_date)


class NewEvent(BaseModel):
    """An event the text tells that is not in the list."""

    title: str
    description: str = ""
    date: Optional[str] = None
    source: str = ""

    _texts = field_validator("title", "description", "source", mode="before")(_text)
    _date = field_validator("date", mode="before")(_date)


class EventUpdateAnswer(BaseModel):
    """Figure 6's two lists; items without a title are dropped."""

    updated_events: list[UpdatedEvent] = Field(default_factory=list)
    new_events: list[NewEvent] = Field(default_factory=list)

    @field_validator("updated_events", mode="before")
    @classmethod
    def _updated(cls, value: Any) -> list[dict[str, Any]]:
        return [o for o in _objects(value) if _text(o.get("original_title"))]

    @field_validator("new_events", mode="before")
    @classmethod
    def _new(cls, value: Any) -> list[dict[str, Any]]:
        return [o for o in _objects(value) if _text(o.get("title"))]


class Decomposition(BaseModel):
    """Figure 7's JSON block: entity names and event-centred sub-queries."""

    entities: list[str] = Field(default_factory=list)
    sub_queries: list[str] = Field(default_factory=list)

    _lists = field_validator("entities", "sub_queries", mode="before")(_strings)


_FENCED_JSON = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def draft_of(answer: str) -> str:
    """The draft: the text before the JSON block (its last well-formed fence, else the first
    fence or brace, so a broken block still leaves the draft)."""
    fenced = list(_FENCED_JSON.finditer(answer))
    cut = fenced[-1].start() if fenced else answer.find("```")
    cut = cut if cut >= 0 else answer.find("{")
    return (answer[:cut] if cut >= 0 else answer).strip()


def parse_decomposition(answer: str) -> tuple[str, Decomposition]:
    """The draft answer (``draft_of``) and the JSON block itself.

    Raises ``OutputParseError`` (``llm_parsing``) when no JSON object validates; the caller
    keeps the draft and decomposes the query without the LLM.
    """
    return draft_of(answer), parse_json_output(answer, Decomposition)


def format_events(events: list[tuple[str, str]]) -> str:
    """``{existing_events}``: one ``- title: description`` line per known event, or "NONE"."""
    if not events:
        return "NONE"
    return "\n".join(f"- {_text(title)}: {_text(description)}" for title, description in events)


# Figure 6, verbatim up to the output format, then our output section.
UPDATE_TEXT = f"""---Task: {EVENTGRAPH_UPDATE}---
-Target activity-
You are an intelligent assistant that helps a human analyst to extract and manage a knowledge \
graph of events from a text document.
-Goal-
Given a text document that is potentially relevant to this activity, and a list of existing \
events, perform two tasks:
1. **Update Existing Events**: For events already tracked, enrich their descriptions with new \
details and refine their titles if the new information provides greater specificity.
2. **Extract New Events**: Identify significant events in the text that are not in the \
existing list.
-Definitions-
1. **Event Title**: A concise, standard-case phrase representing the event.
2. **Event Description**: A **comprehensive** summary of the event. It **MUST** include:
 * **Who**: The specific named entities (persons, organizations, locations) involved.
 * **When**: All specific dates, times, or durations mentioned (e.g., "on 2023-01-05").
 * **What/Why**: The specific action taken, the cause, and the detailed outcome or impact.
 * **Quantitative Data**: Any monetary values, percentages, or counts associated with the event.
3. **Event Date**: The specific date or date range of the event in ISO-8601 format \
(YYYY-MM-DD). If unknown, use "NONE".
-Steps-
1. Analyze the input text and the list of existing events.
2. For each **existing event** found in the text:
 * Assess if the new text provides additional details.
 * Update the description to merge the old information with the new information.
3. Identify **new events** in the text that do not overlap with existing events:
 * Ensure the event is distinct and significant.
 * Generate a descriptive title and a comprehensive description.
 * Extract the source entity (the entity reporting or primarily associated with the event).
4. Return output in English.
-Output-
Answer with one JSON object and nothing else. List under "updated_events" only existing events \
the text adds details to, with "original_title" exactly as listed above:
{{"updated_events": [{{"original_title": "...", "title": "...", "description": "...", \
"date": "YYYY-MM-DD or NONE"}}], "new_events": [{{"title": "...", "description": "...", \
"date": "YYYY-MM-DD or NONE", "source": "..."}}]}}
-Real Data-
Existing Events:
{{existing_events}}
Text:
{{input_text}}
Output:
"""

_ANSWER_RULES = """If you don't know the answer or if the provided **context** does not contain \
sufficient information to provide an answer, just say so. Do not make anything up.
The final response should remove all irrelevant information from the **retrieved data** and \
merge the cleaned information into a comprehensive answer that provides explanations of all the \
key points and implications appropriate for the response length and format.
The response shall preserve the original meaning and use of modal verbs such as "shall", "may" \
or "will".
The response should also preserve all the data references previously included in the \
**context**, but do not mention the **mechanics of the retrieval process**.
Do not list more than 3 record ids in a single reference. Instead, list the top 3 most relevant \
record ids and add "+more" to indicate that there are more.
For example:
"Person X is the owner of Company Y and subject to many allegations of wrongdoing [Data: Chunks \
(C_12, C_3), +more]. He is also CEO of company X [Data: Chunks (C 1)]"
where C_12 represent the id (not the index) of the relevant data record.
Do not include information where the supporting evidence for it is not provided.
Limit your response length to 2000 words."""

_DECOMPOSE_GOAL = f"""-Goal-
Generate a response of the target length and format that responds to the user's question, \
summarize all the **evidence** from text chunks provided below.
Note that the **evidence items** provided below are ranked in the **descending order of \
importance**.
{_ANSWER_RULES}"""

_LENGTH = """-Target response length and format-
multiple paragraphs.
Add sections and commentary to the response as appropriate for the length and format. Style \
the response in markdown."""

# Figure 7, verbatim; the closing line asks for the JSON block in a fence (our wording).
DECOMPOSE_TEXT = f"""---Task: {EVENTGRAPH_DECOMPOSE}---
-Role-
You are a helpful assistant responding to questions about a dataset by synthesizing \
perspectives from **retrieved text chunks**.
-User Question-
{{question}}
-Goal-
1) Generate a response of the target length and format that responds to the user's question, \
summarize all the **evidence** from text chunks provided below.
Note that the **evidence items** provided below are ranked in the **descending order of \
importance**.
{_ANSWER_RULES}
2) A JSON block (only JSON) containing two fields: "entities" (list of specific entity names \
found in the query or answer) and "sub_queries" (list of event-centered sub-query strings) \
that you extracted. Example:
{{"entities": ["entity1", "entity2"], "sub_queries": ["event query 1", "event query 2"]}}
{_LENGTH}
-Retrieved Context-
{{evidence}}
{_DECOMPOSE_GOAL}
{_LENGTH}
Answer now, then the JSON in a ```json fenced block.
"""

_ENRICH_INSTRUCTIONS = """-Goal-
Generate a refined response that synthesizes the "Original Answer" with the "Additional \
Evidence".
Note that the **Additional Evidence** provided below is ranked in the **descending order of \
importance**.
Instructions:
1. **Integrate & Verify**: Seamlessly weave the Evidence into the narrative to explain **how** \
and **why** things happened. If the "Additional Evidence" conflicts with the "Original Answer", \
prioritize the Evidence (Events and Paths) as it is more structured and precise. Correct any \
hallucinations.
2. **Clean & Merge**: Remove all irrelevant information and merge the cleaned information into \
an answer that provides explanations of all the key points and implications.
3. **Tone & Style**: The response shall preserve the original meaning and use of modal verbs \
such as "shall", "may" or "will". Style the response in markdown.
4. **Citations**: The response should preserve and add data references. **Do not list more \
than 3 record ids in a single reference**. Instead, list the top 3 most relevant record ids and \
add "+more".
Citation Example:
"Person X is the owner of Company Y [Data: Events (Event 12, Event 45), Paths (Path 1), +more]. \
He is also CEO of company X [Data: Events (Event 99)]"
(Where Event 12, Path 1, etc., are the IDs found in the evidence below).
Do not include information where the supporting evidence for it is not provided.
-Target response length and format-
multiple paragraphs.
Limit your response length to 2000 words.
Add sections and commentary to the response as appropriate for the length and format."""

# Figure 8, verbatim.
ENRICH_TEXT = f"""---Task: {EVENTGRAPH_ENRICH}---
-Role-
You are an expert editor and analyst. Your task is to refine and enrich a preliminary answer \
using new structured evidence.
-User Question-
{{question}}
-Inputs-
1. **Original Answer**: A preliminary answer generated from text chunks.
2. **Additional Evidence**: A set of specific Events and Reasoning Paths (connections between \
entities) retrieved from a Knowledge Graph.
{_ENRICH_INSTRUCTIONS}
-Data-
[Original Answer]
{{old_answer}}
[Additional Evidence]
{{evidence}}
{_ENRICH_INSTRUCTIONS}
-Final Answer-
"""

# The texts as llama-index templates, built on first access (``lazy_templates``).
UPDATE_PROMPT: PromptTemplate
DECOMPOSE_PROMPT: PromptTemplate
ENRICH_PROMPT: PromptTemplate

__getattr__ = lazy_templates(
    globals(),
    {
        "UPDATE_PROMPT": UPDATE_TEXT,
        "DECOMPOSE_PROMPT": DECOMPOSE_TEXT,
        "ENRICH_PROMPT": ENRICH_TEXT,
    },
)
