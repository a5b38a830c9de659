"""Prompts and output models of SentGraph's LLM calls (paper 004, appendix A, figures 5-8).

The instruction and input parts of the four prompts are the paper's, word for word. The paper
gives no output format, so each prompt ends with an ``---Output---`` section that is **our
addition**: it asks for the JSON the pydantic models below parse (``LLMRunner.astructured``).
The N-N output section also asks for the core sentences, which the paper's figure 5 does not
mention but §3.1 has the same call identify. Every text starts with a ``---Task: <kind>---``
header (the project's convention: logs, cache keys and the scripted test LLM tell the calls
apart by it).

Sentences and paths are numbered from 1 in the prompts, because that is how models count; the
models keep the numbers as the LLM wrote them and the callers map them back. The validators are
lenient about form (null, "3", "[3]", a comma-separated string, "Multinuclear Restatement") and
drop items that cannot be read, so that one bad item does not cost the whole answer.

As in ``extract/prompts.py``, the ``*_PROMPT`` llama-index templates are built on first access,
so importing this module does not import llama-index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional, Sequence

from pydantic import BaseModel, Field, field_validator

from llama_index_e2rag.llm.prompt_text import lazy_templates

if TYPE_CHECKING:
    from llama_index.core.prompts import PromptTemplate

SENTGRAPH_NN = "sentgraph_nn"
SENTGRAPH_NS = "sentgraph_ns"
SENTGRAPH_BRIDGE = "sentgraph_bridge"
SENTGRAPH_REFINE = "sentgraph_refine"

RefineAction = Literal["answer", "expand"]

_NUMBER = re.compile(r"-?\d+")


def _number(value: Any) -> Optional[int]:
    """An item number as the LLM wrote it (3, "3", "[3]", "S3"), or None if there is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _NUMBER.search(value)
        return int(match.group(0)) if match else None
    return None


def _numbers(value: Any) -> list[int]:
    """A list of item numbers from a list, a single number or "1, 3, 4"; unreadable ones go."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [int(n) for n in _NUMBER.findall(value)]
    elif not isinstance(value, (list, tuple)):
        value = [value]
    return [n for n in (_number(item) for item in value) if n is not None]


def _type_name(value: Any) -> str:
    """A relation type in lower case with single spaces ("Multinuclear  Restatement")."""
    return " ".join(str(value or "").lower().replace("_", " ").replace("-", " ").split())


def _readable_relations(*fields: str) -> Any:
    """A ``relations`` validator keeping the objects whose sentence numbers (``fields``) can be
    read, numbers made ints."""

    def read(value: Any) -> list[dict[str, Any]]:
        items = []
        for item in value if isinstance(value, list) else []:
            numbers = [_number(item.get(name)) for name in fields] if isinstance(item, dict) else []
            if numbers and None not in numbers:
                items.append({**item, **dict(zip(fields, numbers))})
        return items

    return field_validator("relations", mode="before")(read)


class _Typed(BaseModel):
    """A relation's type as the LLM named it, in lower case with single spaces."""

    type: str = ""

    _type = field_validator("type", mode="before")(_type_name)


class NNRelation(_Typed):
    """An N-N relation between sentences ``a`` and ``b`` (numbers as in the prompt)."""

    a: int
    b: int


class NNAnswer(BaseModel):
    """The core sentences of a segment and the N-N relations among them (figure 5)."""

    core: list[int] = Field(default_factory=list)
    relations: list[NNRelation] = Field(default_factory=list)

    _core = field_validator("core", mode="before")(_numbers)
    _relations = _readable_relations("a", "b")


class NSRelation(_Typed):
    """An N-S relation from a core ``nucleus`` to a supporting ``satellite`` sentence."""

    nucleus: int
    satellite: int


class NSAnswer(BaseModel):
    """The N-S relations of a segment (figure 6)."""

    relations: list[NSRelation] = Field(default_factory=list)

    _relations = _readable_relations("nucleus", "satellite")


def _triple(item: Any) -> Optional[list[str]]:
    """``[entity1, relation, entity2]`` from a list, a ``{"head", "relation", "tail"}`` object
    or the paper's "(entity1, relation, entity2)" text; None if it is not a triple."""
    if isinstance(item, dict):
        head = item.get("head", item.get("entity1"))
        tail = item.get("tail", item.get("entity2"))
        item = [head, item.get("relation"), tail]
    elif isinstance(item, str):
        item = item.strip().strip("()").split(",")
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        return None
    parts = [" ".join(str(part or "").strip().strip("\"'").split()) for part in item]
    return parts if all(parts) else None


class BridgeAnswer(BaseModel):
    """Relations between pairs of the listed entities (figure 7)."""

    triples: list[tuple[str, str, str]] = Field(default_factory=list)

    @field_validator("triples", mode="before")
    @classmethod
    def _triples(cls, value: Any) -> list[list[str]]:
        if not isinstance(value, list):
            return []
        return [triple for triple in map(_triple, value) if triple is not None]


class RefineAnswer(BaseModel):
    """The evidence paths worth keeping and whether they suffice (figure 8)."""

    keep: list[int] = Field(default_factory=list)
    action: RefineAction = "expand"

    _keep = field_validator("keep", mode="before")(_numbers)

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        """"Answer.", "EXPAND" and null (the default, more evidence) are read; anything else
        fails validation so that the runner's repair round asks again."""
        if value is None:
            return "expand"
        words = set(re.findall(r"[a-z]+", str(value).lower()))
        found = words & {"answer", "expand"}
        return found.pop() if len(found) == 1 else value


def format_sentence_list(texts: Sequence[str], roles: Optional[Sequence[str]] = None) -> str:
    """``{sentence_list}``: one ``[i] text`` line per sentence, numbered from 1, with the
    sentence's role in brackets after the number when ``roles`` are given (the N-S call)."""
    lines = [""]  # the list starts on the line after its label
    for i, text in enumerate(texts):
        role = f" ({roles[i]})" if roles is not None else ""
        lines.append(f"[{i + 1}]{role} {' '.join(text.split())}")
    return "\n".join(lines)


@dataclass(frozen=True)
class EvidencePath:
    """A candidate evidence path as the refinement prompt shows it. Refinement runs on the
    anchors (§3.2), before any expansion, so a path is one anchor sentence and its topic."""

    topic: str
    sentence: str


def format_paths(paths: Sequence[EvidencePath]) -> str:
    """``{indexed_paths}``: one ``[i] (topic) sentence`` line per path, numbered from 1."""
    lines = [""]  # the paths start on the line after their label
    for i, path in enumerate(paths):
        lines.append(f"[{i + 1}] ({path.topic}) {' '.join(path.sentence.split())}")
    return "\n".join(lines)


_SENTENCE_INPUT = """Input:
Topic Entity: {topic_entity}
Sentence List: {sentence_list}"""

# Figure 5, verbatim, then our output section.
NN_TEXT = f"""---Task: {SENTGRAPH_NN}---
Instruction:
You are an expert in rhetorical structure theory (RST) and discourse analysis. Your task is to \
analyze the logical and semantic relationship between sentences sharing the same topic entity, \
focusing on Nucleus-Nucleus (N-N) relations.
N-N Relation Types:
- Conjunction: Sentences A and B are connected and contribute equally to the overall meaning.
- Contrast: Sentences A and B present balanced opposing or contrasting information.
- Disjunction: Sentences A and B present alternative options or possibilities.
- Multinuclear Restatement: Sentences A and B restate the same content with equal emphasis.
- Sequence: Sentences A and B describe events in temporal or logical succession.
{_SENTENCE_INPUT}
---Output---
Also list the core sentences: those that carry the main facts about the topic entity.
Answer with one JSON object and nothing else, using the sentence numbers of the list:
{{"core": [1, 2], "relations": [{{"a": 1, "b": 2, "type": "conjunction|contrast|disjunction|\
restatement|sequence"}}]}}
"""

# Figure 6, verbatim, then our output section.
NS_TEXT = f"""---Task: {SENTGRAPH_NS}---
Instruction:
You are an expert in rhetorical structure theory (RST) and discourse analysis. Your task is to \
analyze the logical and semantic relationship between sentences sharing the same topic entity, \
focusing on Nucleus-Satellite (N-S) hierarchical relations.
N-S Relation Types:
- Cause: Sentence B describes a cause that leads to the situation stated in Sentence A.
- Result: Sentence B describes a result that follows from the situation stated in Sentence A.
- Opposition: Sentence B provides information that contradicts, limits, or challenges the \
situation or claim stated in Sentence A, such as expressing an opposing view, introducing a \
blocking condition, or conceding a contrary point.
- Elaboration: Sentence B adds further details, explanations, examples, justifications, \
motivations, methods, purposes, or other supportive information that helps the reader better \
understand or act upon the situation stated in Sentence A.
- Circumstance: Sentence B sets the background, context, time, place, or conditions under which \
Sentence A should be understood or interpreted.
- Evaluation: Sentence B gives an evaluative, interpretive, or summarizing statement about the \
content of Sentence A, such as expressing a value judgment, commentary, or concise restatement.
- Solutionhood: Sentence B proposes a solution to a problem, question, or challenge described in \
Sentence A.
{_SENTENCE_INPUT}
---Output---
Sentence A is a core sentence (the nucleus), sentence B a supplementary sentence (the satellite).
Answer with one JSON object and nothing else, using the sentence numbers of the list:
{{"relations": [{{"nucleus": 1, "satellite": 2, "type": "cause|result|opposition|elaboration|\
circumstance|evaluation|solutionhood"}}]}}
"""

# Figure 7, verbatim, then our output section.
BRIDGE_TEXT = f"""---Task: {SENTGRAPH_BRIDGE}---
Instruction:
You are an expert in knowledge graph construction and entity relationship extraction. Your task \
is to analyze a given list of entities and identify meaningful known relationships between \
entity pairs.
Relation Extraction Guidelines:
- For each pair of entities, determine if there is a known relationship
- Use concise relation phrases (e.g., "directed", "acted in", "occurred in")
- Output triples in the format (entity1, relation, entity2)
- Do NOT output both directions for the same pair
- Skip pairs with no meaningful relationships
Input:
Entity List: {{entity_list}}
---Output---
Answer with one JSON object and nothing else, writing the entities exactly as listed:
{{"triples": [["entity1", "relation", "entity2"]]}}
"""

# Figure 8, verbatim, then our output section.
REFINE_TEXT = f"""---Task: {SENTGRAPH_REFINE}---
Instruction:
You are a multi-hop QA reasoning assistant. Given a question and candidate evidence sentences, \
your task is to select the most useful sentences for answering the question while retaining \
sufficient evidence for multi-hop reasoning.
Selection Guidelines:
- Keep paths unless they are clearly irrelevant.
- Output "action": "answer" if current evidence is sufficient to answer the question.
- Output "action": "expand" if more evidence is needed.
Input:
Question: {{question}}
Evidence Paths: {{indexed_paths}}
---Output---
Answer with one JSON object and nothing else, listing the numbers of the paths to keep:
{{"keep": [1, 2], "action": "answer|expand"}}
"""

# The texts as llama-index templates, built on first access (``lazy_templates``).
NN_PROMPT: PromptTemplate
NS_PROMPT: PromptTemplate
BRIDGE_PROMPT: PromptTemplate
REFINE_PROMPT: PromptTemplate

__getattr__ = lazy_templates(
    globals(),
    {
        "NN_PROMPT": NN_TEXT,
        "NS_PROMPT": NS_TEXT,
        "BRIDGE_PROMPT": BRIDGE_TEXT,
        "REFINE_PROMPT": REFINE_TEXT,
    },
)
