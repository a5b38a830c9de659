"""Prompts and output models of the LLM extraction passes (E²RAG §4, appendix D.3).

Every prompt is a text (``*_TEXT``, filled by ``prompt_text.fill``) and, built from it on first
access, a llama-index ``PromptTemplate`` (``*_PROMPT``; users override them through
``get_prompts()`` / ``update_prompts()`` on the components that use them), so importing this
module does not import llama-index. Every prompt starts with a
``---Task: <kind>---`` header line: the header names the pass in logs and caches, and lets a
scripted test LLM tell the passes apart without guessing. Prompts ask for JSON; the same pydantic
models serve function-calling LLMs (as the tool schema) and text LLMs (as the parse target).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, Field, field_validator

from llama_index_e2rag.llm.prompt_text import lazy_templates

if TYPE_CHECKING:
    from llama_index.core.prompts import PromptTemplate

ENTITY_EXTRACTION = "entity_extraction"
EVENT_EXTRACTION = "event_extraction"
COMBINED_EXTRACTION = "combined_extraction"
QUERY_CUES = "query_cues"
HYPOTHETICAL_ANSWER = "hypothetical_answer"

ENTITY_TYPES = (
    "Person, Creature, Organization, Location, Object (artifacts, possessions), Concept, Other"
)


def _none_to_empty(value: Any) -> Any:
    return "" if value is None else value


class ExtractedEntity(BaseModel):
    """An entity as it appears in this passage, with the description it has here."""

    name: str = Field(description="The entity's name exactly as the passage writes it.")
    type: str = Field(default="Other", description=f"One of: {ENTITY_TYPES}.")
    description: str = Field(
        default="",
        description="One sentence on who or what the entity is and does in THIS passage only.",
    )

    _coerce = field_validator("name", "type", "description", mode="before")(_none_to_empty)


class EntityExtraction(BaseModel):
    """All entities of a passage."""

    entities: list[ExtractedEntity] = Field(default_factory=list)


class ExtractedEvent(BaseModel):
    """Something that happens in this passage."""

    title: str = Field(description="A short title of the event (3-8 words).")
    description: str = Field(
        default="",
        description="One sentence saying what happens, naming the participants by name.",
    )
    participants: list[str] = Field(
        default_factory=list, description="Names of the entities taking part in the event."
    )
    date: Optional[str] = Field(
        default=None, description="When it happens, if the passage says so; otherwise null."
    )

    _coerce = field_validator("title", "description", mode="before")(_none_to_empty)

    @field_validator("participants", mode="before")
    @classmethod
    def _participants_list(cls, value: Any) -> Any:
        """LLMs sometimes answer "A, B" or null instead of a list; accept both."""
        if value is None:
            return []
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("date", mode="before")
    @classmethod
    def _date_text(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return str(value)


class EventExtraction(BaseModel):
    """All events of a passage, in the order they are told."""

    events: list[ExtractedEvent] = Field(default_factory=list)


class CombinedExtraction(BaseModel):
    """Entities and events of a passage from one call."""

    entities: list[ExtractedEntity] = Field(default_factory=list)
    events: list[ExtractedEvent] = Field(default_factory=list)


class QueryCues(BaseModel):
    """Entity and event phrases named in a question (the retrieval cues)."""

    entities: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)


_ENTITY_RULES = f"""- Identify the clearly defined, meaningful entities in the input text: people, \
creatures, places, organizations, important objects.
- For each entity give:
  - "name": the name as the text writes it (keep titles such as "Professor" if the text uses them);
  - "type": one of {ENTITY_TYPES};
  - "description": ONE sentence describing the entity's attributes, state and actions in THIS text \
only. Do not add knowledge from outside the text; the same entity gets a different description in \
another passage, and that is intended.
- List each entity once."""

_EVENT_RULES = """- Identify the events of the input text: actions, occurrences, changes of state, \
decisions, in the order they are told.
- For each event give:
  - "title": a short title (3-8 words);
  - "description": ONE sentence saying what happens, naming every participant by the name the text \
uses (no pronouns);
  - "participants": the names of the entities taking part;
  - "date": the time of the event if the text states one (a date, a day, "that night"), else null.
- Base everything solely on the input text."""

_ENTITY_EXAMPLE = """{"entities": [
  {"name": "Harry", "type": "Person", "description": "Harry is a first-year who catches the \
Snitch in his mouth during his first Quidditch match."},
  {"name": "Snape", "type": "Person", "description": "Snape stares at Harry without blinking and \
mutters during the match."},
  {"name": "Snitch", "type": "Object", "description": "The Snitch is the golden ball Harry \
catches to win the match."}
]}"""

_EVENT_EXAMPLE = """{"events": [
  {"title": "Snape mutters during the match", "description": "Snape stares at Harry and mutters \
while Harry's broom bucks.", "participants": ["Snape", "Harry"], "date": null},
  {"title": "Harry catches the Snitch", "description": "Harry catches the Snitch in his mouth and \
Gryffindor wins.", "participants": ["Harry", "Gryffindor"], "date": "Saturday"}
]}"""

_INPUT = """---Input Text---
{text}
---Output---
"""

ENTITY_EXTRACTION_TEXT = f"""---Task: {ENTITY_EXTRACTION}---
---Role---
You are a knowledge graph specialist extracting entities from a passage of a story.

---Instructions---
{_ENTITY_RULES}
- Answer with one JSON object with the key "entities" and nothing else.

---Example output---
{_ENTITY_EXAMPLE}

{_INPUT}"""

EVENT_EXTRACTION_TEXT = f"""---Task: {EVENT_EXTRACTION}---
---Role---
You are a knowledge graph specialist extracting events from a passage of a story.

---Instructions---
{_EVENT_RULES}
- Answer with one JSON object with the key "events" and nothing else.

---Example output---
{_EVENT_EXAMPLE}

{_INPUT}"""

COMBINED_EXTRACTION_TEXT = f"""---Task: {COMBINED_EXTRACTION}---
---Role---
You are a knowledge graph specialist extracting entities and events from a passage of a story.

---Instructions---
Entities:
{_ENTITY_RULES}
Events:
{_EVENT_RULES}
- Answer with one JSON object with the keys "entities" and "events" and nothing else, e.g.
{{"entities": [{{"name": ..., "type": ..., "description": ...}}], "events": \
[{{"title": ..., "description": ..., "participants": [...], "date": ...}}]}}

{_INPUT}"""

# The paper's query-side extractor (appendix D.3), kept close to the original wording.
QUERY_CUE_TEXT = f"""---Task: {QUERY_CUES}---
---Role---
You are a helpful assistant tasked with identifying entities and events in the user's query.

---Goal---
Given the query, list both entities and events. Entities are people, places, organizations, \
or objects mentioned in the query, while events are actions, occurrences, or happenings that take \
place.

---Instructions---
- Output the entities and events in JSON format.
- The JSON should have two keys:
  - "entities" for people, places, organizations, or objects.
  - "events" for actions, occurrences, or happenings.

-Examples-
Example 1:
Query: "How did Napoleon's invasion of Russia affect his empire's strength?"
Output:
{{"entities": ["Napoleon", "Russia", "Napoleon's empire"], "events": ["invasion of Russia", \
"empire's decline"]}}

Example 2:
Query: "What role did MIT scientists play in the Manhattan Project?"
Output:
{{"entities": ["MIT", "MIT scientists", "Manhattan Project"], "events": ["scientific research", \
"atomic bomb development"]}}

Example 3:
Query: "How did the Industrial Revolution change London's population?"
Output:
{{"entities": ["London", "London's population", "Industrial Revolution"], "events": \
["population growth", "urbanization", "industrial development"]}}

-Real Data-
Query: {{query}}
Output:
"""

# HyDE (Gao et al., 2023) as used in E²RAG §4: a draft answer written without the document.
HYPOTHETICAL_ANSWER_TEXT = f"""---Task: {HYPOTHETICAL_ANSWER}---
Write a short passage (3-5 sentences) that answers the question below as if it were taken from \
the story it asks about. Name the characters, places and events involved. If you do not know the \
story, write a plausible passage anyway; it is only used to find the real passages.

Question: {{query}}
Passage:
"""

# The texts as llama-index templates, built on first access (``lazy_templates``).
ENTITY_EXTRACTION_PROMPT: PromptTemplate
EVENT_EXTRACTION_PROMPT: PromptTemplate
COMBINED_EXTRACTION_PROMPT: PromptTemplate
QUERY_CUE_PROMPT: PromptTemplate
HYPOTHETICAL_ANSWER_PROMPT: PromptTemplate

__getattr__ = lazy_templates(
    globals(),
    {
        "ENTITY_EXTRACTION_PROMPT": ENTITY_EXTRACTION_TEXT,
        "EVENT_EXTRACTION_PROMPT": EVENT_EXTRACTION_TEXT,
        "COMBINED_EXTRACTION_PROMPT": COMBINED_EXTRACTION_TEXT,
        "QUERY_CUE_PROMPT": QUERY_CUE_TEXT,
        "HYPOTHETICAL_ANSWER_PROMPT": HYPOTHETICAL_ANSWER_TEXT,
    },
)
