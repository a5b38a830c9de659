"""ScriptedLLM: the only LLM fake of the test suite (see TEAM_CONTRACTS.md).

It reads the ``---Task: <kind>---`` header of each prompt and answers with JSON derived from the
text inside the prompt, the way a (very literal) extraction model would:

- entities: the given ``names`` found in the text, plus capitalised word sequences (sentence-initial
  ones unless they start with a common word such as "The" or "When"), each described by the first
  sentence it appears in;
- events: one per sentence of three words or more; title = its first six words, description =
  the sentence, participants = the entities in it, date = a weekday, month or year if present;
- query cues: the capitalised names of the query and the rest of it as one event phrase;
- hypothetical answers: ``hypothetical_text``;
- SentGraph N-N (``[i] text`` lines of the sentence list): core = the sentences not opened by a
  subordinating connective ("because", "so", "for example", ...), relations = consecutive cores,
  "sequence" when the later one opens with then/after, else "conjunction";
- SentGraph N-S: each ``[i] (supplementary, attached to [j])`` line → nucleus j, satellite i,
  "cause" when it opens with because, "result" with so, else "elaboration";
- SentGraph bridges: every pair of listed entities that are both in ``names``, in ``names`` order,
  → ``[a, "related to", b]``;
- SentGraph refinement: keep paths 1-3, action ``refine_action``;
- E²GraphRAG event update (``- title: description`` lines of "Existing Events", then "Text"):
  a listed event is updated when one sentence of the text holds all the content words of its
  title (description = the old one + that sentence); the first ``max_new_events`` other
  sentences of three words or more are new events as in ``events_of``, each with the first
  name in it as its source;
- any other kind: ``handlers[kind](prompt)`` or ``default_response``.

Prompts containing ``fail_marker`` raise, those containing ``malformed_marker`` get unparseable
output (``malformed_text``; both optionally only the first N times), those containing
``hang_marker`` never answer in time: the call sleeps ``hang_seconds`` (async: a cancellable
``asyncio.sleep``; sync: a wait that ``release()`` ends early), then answers normally. With
``function_calling=True`` it reports ``is_function_calling_model`` and answers llama-index tool
calls with the same JSON.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from typing import Any, Callable, Optional, Sequence

from llama_index.core.base.llms.generic_utils import completion_response_to_chat_response
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from pydantic import Field, PrivateAttr

_HEADER = re.compile(r"---Task: (\w+)---")
_INPUT = re.compile(r"---Input Text---\n(.*?)\n---Output---", re.DOTALL)
_QUERY = re.compile(r"Query: (.*?)\nOutput:", re.DOTALL)
_ORIGINAL = re.compile(r"---Original task---\n(.*?)\n---Your answer---", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’]?\s+")
_CAPITALISED = re.compile(r"\b(?:(?:Mr|Mrs|Ms|Dr)\.\s+)?[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
_DATE = re.compile(
    r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|January|February|March|April"
    r"|May|June|July|August|September|October|November|December|1[5-9]\d\d|20\d\d)\b"
)
_COMMON = frozenset(
    """the a an he she it they we you i his her its their our my when then but and or so if as
    at in on of to after before that this there these those what who whom whose how why where
    which did does do is was were are be one once now yes no not all some every each while until
    with without from by for meanwhile soon later suddenly finally still just also""".split()
)
_SENTENCE_LIST = re.compile(r"Sentence List:(.*?)\n---Output---", re.DOTALL)
_NUMBERED = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_ATTACHED = re.compile(r"^\((?:core|supplementary, attached to \[(\d+)\])\) (.*)$")
_ENTITY_LIST = re.compile(r"Entity List:(.*?)\n---Output---", re.DOTALL)
_EVENT_UPDATE = re.compile(r"Existing Events:\n(.*?)\nText:\n(.*)\nOutput:", re.DOTALL)
#: Openers that make a sentence supporting rather than core, for the N-N derivation.
_SUBORDINATING = re.compile(
    r"^(?:because|since|so|therefore|thus|hence|although|though|for example|for instance)\b",
    re.IGNORECASE,
)
_MALFORMED = 'Here is what I found: {"entities": [{"name": "unterminated'


class ScriptedLLM(CustomLLM, FunctionCallingLLM):
    """Deterministic LLM answering extraction, cue and HyDE prompts from the prompt's own text."""

    names: list[str] = Field(default_factory=list)
    entity_types: dict[str, str] = Field(default_factory=dict)
    hypothetical_text: str = "A hypothetical passage about the story."
    refine_action: str = "expand"
    #: new events per E²GraphRAG update call (a model reports the significant ones, not one
    #: per sentence)
    max_new_events: int = 5
    default_response: str = "Scripted answer."
    handlers: dict[str, Callable[[str], str]] = Field(default_factory=dict)
    fail_marker: Optional[str] = None
    fail_times: Optional[int] = None
    malformed_marker: Optional[str] = None
    malformed_times: Optional[int] = None
    malformed_text: str = _MALFORMED
    hang_marker: Optional[str] = None
    hang_times: Optional[int] = None
    hang_seconds: float = 30.0
    fenced: bool = False
    report_usage: bool = False
    function_calling: bool = False
    async_delay: float = 0.0

    _prompts: list[str] = PrivateAttr(default_factory=list)
    _kinds: Counter = PrivateAttr(default_factory=Counter)
    _failed: int = PrivateAttr(default=0)
    _malformed: int = PrivateAttr(default=0)
    _hung: int = PrivateAttr(default=0)
    _release: threading.Event = PrivateAttr(default_factory=threading.Event)
    _in_flight: int = PrivateAttr(default=0)
    _max_in_flight: int = PrivateAttr(default=0)
    _usage: Counter = PrivateAttr(default_factory=Counter)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    # -- what tests read --------------------------------------------------------------------

    @property
    def prompts(self) -> list[str]:
        return list(self._prompts)

    @property
    def calls_by_kind(self) -> Counter:
        return Counter(self._kinds)

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    @property
    def hung_calls(self) -> int:
        """Calls that matched ``hang_marker`` and slept instead of answering."""
        return self._hung

    def release(self) -> None:
        """End every sync hang now (and any later one at once): for test teardown."""
        self._release.set()

    @property
    def usage(self) -> dict[str, int]:
        """Tokens reported so far (whitespace words), when ``report_usage`` is on."""
        return dict(self._usage)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name="scripted",
            is_chat_model=False,
            is_function_calling_model=self.function_calling,
        )

    # -- llama-index LLM interface ----------------------------------------------------------

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._enter()
        try:
            if self._hangs(prompt):
                self._release.wait(self.hang_seconds)
            return self._respond(prompt, kwargs)
        finally:
            self._leave()

    @llm_completion_callback()
    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        self._enter()
        try:
            await asyncio.sleep(self.async_delay)
            if self._hangs(prompt):
                await asyncio.sleep(self.hang_seconds)
            return self._respond(prompt, kwargs)
        finally:
            self._leave()

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        response = self.complete(prompt, formatted=formatted, **kwargs)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=response.text, delta=response.text)

        return gen()

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        prompt = self.messages_to_prompt(messages)
        response = await self.acomplete(prompt, formatted=True, **kwargs)
        return completion_response_to_chat_response(response)

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: Optional[str | ChatMessage] = None,
        chat_history: Optional[list[ChatMessage]] = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        messages = list(chat_history or [])
        if user_msg is not None:
            messages.append(
                user_msg if isinstance(user_msg, ChatMessage) else ChatMessage(content=user_msg)
            )
        return {"messages": messages, "tool_name": tools[0].metadata.name}

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        try:
            arguments = json.loads(response.message.content or "")
        except ValueError as exc:
            raise ValueError(f"scripted model made no valid tool call: {exc}") from exc
        return [
            ToolSelection(
                tool_id="scripted-call",
                tool_name=response.message.additional_kwargs["tool_name"],
                tool_kwargs=arguments,
            )
        ]

    # -- behaviour ----------------------------------------------------------------------------

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _respond(self, prompt: str, kwargs: dict[str, Any]) -> CompletionResponse:
        kind = self._kind(prompt)
        with self._lock:
            self._prompts.append(prompt)
            self._kinds[kind] += 1
            fail = self._triggered(prompt, self.fail_marker, self.fail_times, "_failed")
            malformed = self._triggered(
                prompt, self.malformed_marker, self.malformed_times, "_malformed"
            )
        if fail:
            raise RuntimeError(f"scripted failure for a {kind} prompt")
        text = self.malformed_text if malformed else self._answer(kind, prompt)
        if self.fenced and text.startswith("{") and "tool_name" not in kwargs:
            text = f"Sure, here you go:\n```json\n{text}\n```\nHope this helps."
        extra: dict[str, Any] = {}
        if "tool_name" in kwargs:
            extra["tool_name"] = kwargs["tool_name"]
        if self.report_usage:
            extra.update(prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()))
            with self._lock:
                self._usage.update(extra)
        return CompletionResponse(text=text, additional_kwargs=extra)

    def _hangs(self, prompt: str) -> bool:
        with self._lock:
            return self._triggered(prompt, self.hang_marker, self.hang_times, "_hung")

    def _triggered(
        self, prompt: str, marker: Optional[str], times: Optional[int], counter: str
    ) -> bool:
        if marker is None or marker not in prompt:
            return False
        done = getattr(self, counter)
        if times is not None and done >= times:
            return False
        setattr(self, counter, done + 1)
        return True

    @staticmethod
    def _kind(prompt: str) -> str:
        match = _HEADER.search(prompt)
        return match.group(1) if match else "unknown"

    def _answer(self, kind: str, prompt: str) -> str:
        if kind in self.handlers:
            return self.handlers[kind](prompt)
        if kind == "json_repair":
            original = _ORIGINAL.search(prompt)
            inner = original.group(1) if original else ""
            return self._answer(self._kind(inner), inner)
        if kind in ("entity_extraction", "event_extraction", "combined_extraction"):
            match = _INPUT.search(prompt)
            text = match.group(1) if match else ""
            answer: dict[str, Any] = {}
            if kind != "event_extraction":
                answer["entities"] = self.entities_of(text)
            if kind != "entity_extraction":
                answer["events"] = self.events_of(text)
            return json.dumps(answer)
        if kind == "query_cues":
            matches = _QUERY.findall(prompt)
            return json.dumps(self.cues_of(matches[-1] if matches else ""))
        if kind == "hypothetical_answer":
            return self.hypothetical_text
        if kind == "sentgraph_nn":
            return json.dumps(self.nn_relations_of(prompt))
        if kind == "sentgraph_ns":
            return json.dumps(self.ns_relations_of(prompt))
        if kind == "sentgraph_bridge":
            return json.dumps(self.bridges_of(prompt))
        if kind == "sentgraph_refine":
            return json.dumps({"keep": [1, 2, 3], "action": self.refine_action})
        if kind == "eventgraph_update":
            return json.dumps(self.event_updates_of(prompt))
        return self.default_response

    # -- derivations (public so tests can state expectations in the same terms) ---------------

    def names_in(self, text: str) -> list[str]:
        """Given names present in the text, then capitalised sequences, in order of appearance."""
        found: list[tuple[int, str]] = []
        for name in self.names:
            match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)
            if match:
                found.append((match.start(), name))
        for match in _CAPITALISED.finditer(text):
            words = match.group(0).split()
            while words and words[0].lower() in _COMMON:
                words = words[1:]
            if words and not _DATE.fullmatch(" ".join(words)):
                found.append((match.start(), " ".join(words)))
        names: list[str] = []
        for _, name in sorted(found, key=lambda item: item[0]):
            if name not in names:
                names.append(name)
        return names

    def entities_of(self, text: str) -> list[dict[str, str]]:
        sentences = _SENTENCE_END.split(text.strip())
        entities = []
        for name in self.names_in(text):
            context = next((s for s in sentences if name in s), text[:80])
            entities.append(
                {
                    "name": name,
                    "type": self.entity_types.get(name, "Person"),
                    "description": f"{name} in this passage: {context}",
                }
            )
        return entities

    def events_of(self, text: str) -> list[dict[str, Any]]:
        events = []
        for sentence in _SENTENCE_END.split(text.strip()):
            words = sentence.split()
            if len(words) < 3:
                continue
            date = _DATE.search(sentence)
            events.append(
                {
                    "title": " ".join(words[:6]).rstrip(".,;:!?"),
                    "description": sentence,
                    "participants": self.names_in(sentence),
                    "date": date.group(0) if date else None,
                }
            )
        return events

    def cues_of(self, query: str) -> dict[str, list[str]]:
        query = query.strip().strip('"')
        entities = self.names_in(query)
        rest = query
        for name in entities:
            rest = rest.replace(name, " ")
        rest = re.sub(r"['’]s\b", " ", rest)
        words = [w for w in re.findall(r"[A-Za-z']+", rest) if w.lower() not in _COMMON]
        return {"entities": entities, "events": [" ".join(words)] if words else []}

    @staticmethod
    def sentence_list_of(prompt: str) -> list[tuple[int, str]]:
        """The ``[i] text`` lines of a SentGraph prompt's sentence list."""
        match = _SENTENCE_LIST.search(prompt)
        return [(int(i), text) for i, text in _NUMBERED.findall(match.group(1) if match else "")]

    def nn_relations_of(self, prompt: str) -> dict[str, Any]:
        texts = dict(self.sentence_list_of(prompt))
        core = [i for i, text in texts.items() if not _SUBORDINATING.match(text)]
        relations = []
        for a, b in zip(core, core[1:]):
            sequence = re.match(r"(?:then|after)\b", texts[b], re.IGNORECASE)
            relations.append({"a": a, "b": b, "type": "sequence" if sequence else "conjunction"})
        return {"core": core, "relations": relations}

    def ns_relations_of(self, prompt: str) -> dict[str, Any]:
        relations = []
        for i, line in self.sentence_list_of(prompt):
            match = _ATTACHED.match(line)
            if match is None or match.group(1) is None:
                continue
            opener = match.group(2).split(" ", 1)[0].strip(",").lower()
            type_ = {"because": "cause", "so": "result"}.get(opener, "elaboration")
            relations.append({"nucleus": int(match.group(1)), "satellite": i, "type": type_})
        return {"relations": relations}

    def bridges_of(self, prompt: str) -> dict[str, Any]:
        match = _ENTITY_LIST.search(prompt)
        lines = (match.group(1) if match else "").splitlines()
        listed = {line.strip().removeprefix("- ") for line in lines}
        known = [name for name in self.names if name in listed]
        pairs = [(a, b) for i, a in enumerate(known) for b in known[i + 1 :]]
        return {"triples": [[a, "related to", b] for a, b in pairs]}

    def event_updates_of(self, prompt: str) -> dict[str, Any]:
        """E²GraphRAG update answer: listed events the text's sentences name, the rest new."""
        match = _EVENT_UPDATE.search(prompt)
        listed_text, text = match.groups() if match else ("NONE", "")
        listed = [
            line.removeprefix("- ").partition(": ")
            for line in listed_text.splitlines()
            if line.startswith("- ")
        ]
        sentences = [s for s in _SENTENCE_END.split(text.strip()) if len(s.split()) >= 3]
        used: set[str] = set()
        updated = []
        for title, _, description in listed:
            words = {w for w in re.findall(r"[a-z']+", title.lower()) if w not in _COMMON}
            found = next(
                (s for s in sentences if words and words <= set(re.findall(r"[a-z']+", s.lower()))),
                None,
            )
            if found is not None:
                used.add(found)
                updated.append(
                    {
                        "original_title": title,
                        "title": title,
                        "description": f"{description} {found}".strip(),
                        "date": None,
                    }
                )
        new = []
        for sentence in sentences:
            if sentence in used or len(new) >= self.max_new_events:
                continue
            (event,) = self.events_of(sentence)
            names = event["participants"]
            new.append(
                {
                    "title": event["title"],
                    "description": event["description"],
                    "date": event["date"],
                    "source": names[0] if names else "",
                }
            )
        return {"updated_events": updated, "new_events": new}
