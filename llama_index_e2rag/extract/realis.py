"""Which predicates are realis events: what the story tells as actually happening.

LitBank's events (Sims, Park & Bamman 2019) are actions and changes told as having happened —
not states, not negated, hypothetical, wished, asked about, or only spoken of. The grounded
parse keeps every predicate as an event node (retrieval reads them all); this marks the realis
ones (``attrs["realis"]``), which timelines show and LitBank scores. Rules, checked on LitBank
with the works split in two halves (docs/benchmarks.md, *LitBank*):

* not a copula, not negated, no modal ("would go"), not an infinitive or open complement
  ("wanted to go"), not in an if/unless clause, not in a question;
* not a state (a short list of stative verbs: know, seem, love, remain, ...);
* not inside quotation marks (what characters say happened is theirs, not the story's).
"""

from __future__ import annotations

from typing import Any

from llama_index_e2rag.extract.speakers import quotes

#: Verbs of states, not events (Vendler's states and the common verbs of feeling and
#: possession), read by lemma.
STATIVE = frozenset(
    """be have know think believe seem appear love like hate want wish hope need feel remember
    understand mean own belong contain consist resemble deserve fear doubt suppose prefer matter
    exist live lie stand sit remain keep imagine expect intend care mind""".split()
)
MODALS = frozenset("would could should might may must will shall can 'd 'll ought".split())
_CONDITIONS = frozenset({"if", "unless"})


def quoted_tokens(doc: Any) -> set[int]:
    """Indices of the tokens inside quotation marks (curly, straight or ``LaTeX`` style)."""
    return {i for quote in quotes(doc) for i in range(quote.start, quote.end)}


def is_realis(verb: Any, negated: bool, quoted: set[int]) -> bool:
    """Whether the predicate ``verb`` (a spaCy token) is told as actually happening."""
    if verb.pos_ == "AUX" or negated or verb.i in quoted:
        return False
    if verb.lemma_.lower() in STATIVE or verb.dep_ == "xcomp":
        return False
    for child in verb.children:
        if child.dep_ == "aux" and (child.lower_ in MODALS or child.tag_ == "MD"):
            return False
        if child.dep_ == "aux" and child.lower_ == "to":
            return False
        if child.dep_ == "mark" and child.lower_ in _CONDITIONS:
            return False
    return not verb.sent.text.rstrip().endswith("?")
