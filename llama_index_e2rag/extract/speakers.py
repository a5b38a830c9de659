"""Who speaks each quotation, and to whom: inside quotation marks "I" is the speaker and "you"
the one spoken to, not the narrator.

A reader follows a character through what she says ("'I painted those pictures,' said Pierre
Grassou"), and LitBank marks those pronouns as the speaker's mentions. The rules are the
deterministic baseline of quote attribution (He, Barbosa & Kondrak 2013; BookNLP's
pre-model heuristics), without a trained model:

* an attributed quote: a speech verb in the narration right after the quote ('"...," said
  Anne', '"...," she replied') or right before it ('Anne said, "..."'), whose subject is a
  person — a name, a resolved he/she, a person noun phrase or the narrator's I;
* a quote interrupted by its attribution ('"...," said Anne, "but..."') keeps its speaker;
* in a conversation (quotes with no narration between them) speakers take turns: the next
  quote is the previous one's listener's;
* otherwise the subject of the narration just before the quote ("Anne smiled. 'I know.'").

The listener is whom the speech verb addresses ("said Anne to him"), a name called out in the
quote ("'My dear Mr. Bennet, ...'"), or the other speaker of the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

#: A person as the rest of the extraction keys it: (normalised key, readable name).
Who = tuple[str, str]

#: Verbs that attribute speech or thought to their subject, read by lemma.
SPEECH_VERBS = frozenset(
    """say ask reply answer cry exclaim return continue add observe remark whisper shout call
    murmur mutter repeat rejoin resume respond retort declare insist interrupt demand inquire
    enquire explain begin protest suggest admit urge groan sigh laugh scream sob stammer gasp
    growl roar snap think tell pursue venture persist plead cry argue agree announce""".split()
)
FIRST_PERSON = frozenset("i me my mine myself".split())
SECOND_PERSON = frozenset("you your yours yourself thee thou thy thine thyself ye".split())
OPENING, CLOSING, EITHER = frozenset("“‘«`"), frozenset("”’»"), frozenset('"')
_ENDS = frozenset(".!?")
#: A quote ending so goes on in the narration after it ('"I know," said Anne').
_GOES_ON = frozenset({",", "-", "--", "—", "–", ";", ":"})
#: How far from a quote its attribution may sit, in tokens ('"...," said the old man').
WINDOW = 12
_INVERTED_DEPS = frozenset({"dobj", "attr", "npadvmod", "appos"})
_VOCATIVE_LEAD = frozenset("my dear oh o good".split())


@dataclass
class Quote:
    """The tokens inside one pair of quotation marks, and who says them to whom."""

    start: int  # first token inside the marks
    end: int  # one past the last token inside
    speaker: Optional[Who] = None
    listener: Optional[Who] = None


def quotes(doc: Any) -> list[Quote]:
    """Every quotation of ``doc`` in text order (curly, straight or ``LaTeX`` style marks); an
    unclosed one runs to the end of the text."""
    found: list[Quote] = []
    start: Optional[int] = None
    for tok in doc:
        text = tok.text
        opens = text in OPENING or text == "``" or (text in EITHER and start is None)
        closes = text in CLOSING or text == "''" or (text in EITHER and start is not None)
        if opens and (start is None or start == tok.i):  # "``" may be two "`" tokens
            start = tok.i + 1
        elif closes and start is not None:
            if tok.i > start:
                found.append(Quote(start, tok.i))
            start = None
    if start is not None and start < len(doc):
        found.append(Quote(start, len(doc)))
    return found


def attribute(doc: Any, found: list[Quote], who: Callable[[Any], Optional[Who]]) -> list[Quote]:
    """Fill in each quote's speaker and listener (``who(token)``: the person a token heads,
    if any), in text order, so a conversation's turns follow from what came before."""
    for i, quote in enumerate(found):
        before = found[i - 1] if i else None
        after = found[i + 1] if i + 1 < len(found) else None
        gap_before = _gap(doc, before.end + 1 if before else 0, quote.start - 1)
        gap_after = _gap(doc, quote.end + 1, after.start - 1 if after else len(doc))
        taken = before is not None and _turn_taken(doc, before, gap_before)
        verb = _speech_verb(_after(doc, quote, gap_after)) or _speech_verb(_before(gap_before))
        if verb is not None:  # an attributed quote, even if its speaker is nobody we know
            quote.speaker = _subject(verb, who)
            quote.listener = _addressed(verb, who)
        else:
            quote.speaker = _turn(found, i, gap_before, taken, who)
        if quote.listener is None:
            quote.listener = _vocative(doc, quote, who)
        if quote.listener is None and taken:
            quote.listener = next((p for p in (before.speaker, before.listener)
                                   if p is not None and p != quote.speaker), None)
        if quote.listener == quote.speaker:
            quote.listener = None
    return found


def spoken_pronouns(doc: Any, found: list[Quote]) -> dict[int, Who]:
    """Token index -> whom each quoted I/me/my (its quote's speaker) or you/your (its listener)
    stands for, where ``attribute`` told them."""
    spoken: dict[int, Who] = {}
    for quote in found:
        for tok in doc[quote.start : quote.end]:
            if tok.pos_ != "PRON":
                continue
            person = (quote.speaker if tok.lower_ in FIRST_PERSON
                      else quote.listener if tok.lower_ in SECOND_PERSON else None)
            if person is not None:
                spoken[tok.i] = person
    return spoken


def _gap(doc: Any, start: int, end: int) -> list[Any]:
    """The narration tokens in ``[start, end)``: between two quotes' marks."""
    return [doc[i] for i in range(max(start, 0), min(end, len(doc)))]


def _after(doc: Any, quote: Quote, gap: list[Any]) -> list[Any]:
    """The narration right after a quote, up to its sentence end, where it goes on the
    quote's sentence ('"...," said Anne.', '"...?" cried his wife') rather than opening one
    ('"...?" Mr. Bennet replied that he had not.')."""
    cut = next((n for n, tok in enumerate(gap) if tok.text in _ENDS), len(gap))
    window = gap[: min(cut, WINDOW)]
    if not window or window[0].text[:1].islower() or doc[quote.end - 1].text in _GOES_ON:
        return window
    verb = _speech_verb(window)
    if doc[quote.end - 1].text in ("?", "!") and verb is not None:
        if not any(child.dep_ == "ccomp" for child in verb.children):
            return window  # '"...?" Anne asked.'
    return []


def _before(gap: list[Any]) -> list[Any]:
    """The narration right before a quote, from the last sentence end ('Anne said, "...')."""
    cut = max((n + 1 for n, tok in enumerate(gap) if tok.text in _ENDS), default=0)
    return gap[max(cut, len(gap) - WINDOW) :]


def _words(doc: Any, gap: list[Any]) -> bool:
    return any(tok.is_alpha for tok in gap)


def _speech_verb(window: list[Any]) -> Optional[Any]:
    """The speech verb of the narration next to a quote (its attribution)."""
    for tok in window:
        if tok.lemma_.lower() in SPEECH_VERBS and tok.pos_ in ("VERB", "AUX"):
            return tok
    return None


def _subject(verb: Any, who: Callable[[Any], Optional[Who]]) -> Optional[Who]:
    """The speech verb's subject, its first conjunct's ("Anne turned and said, ..."), or, in
    an inverted attribution, the noun right after it ('"...?" cried his wife', which the small
    model parses as an object)."""
    first = verb
    while True:
        for child in verb.children:
            if child.dep_ in ("nsubj", "nsubjpass"):
                return who(child)
        if verb.dep_ != "conj" or verb.head is verb:
            break
        verb = verb.head
    inverted = next((c for c in first.rights if c.dep_ in _INVERTED_DEPS), None)
    return None if inverted is None else who(inverted)


def _addressed(verb: Any, who: Callable[[Any], Optional[Who]]) -> Optional[Who]:
    """Whom a speech verb addresses: 'said Anne to him', 'she told him', 'turned to Wentworth
    and said' (an object is the speaker where no subject precedes: 'asked Mr. Hale')."""
    verbs = [verb, verb.head] if verb.dep_ == "conj" else [verb]
    for head in verbs:
        for child in head.children:
            if child.dep_ == "prep" and child.lower_ == "to":
                for obj in child.children:
                    if obj.dep_ == "pobj":
                        return who(obj)
    subject = any(c.dep_ in ("nsubj", "nsubjpass") for c in verb.children)
    if subject and verb.lemma_.lower() in ("tell", "ask", "answer"):
        for child in verb.children:
            if child.dep_ in ("dobj", "dative"):
                return who(child)
    return None


def _turn_taken(doc: Any, before: Quote, gap: list[Any]) -> bool:
    """Whether nothing but the quote before's attribution separates two quotes."""
    attribution = _after(doc, before, gap)
    narration = gap[len(attribution) :] if _speech_verb(attribution) else gap
    return not _words(doc, narration)


def _turn(found: list[Quote], i: int, gap: list[Any], taken: bool,
          who: Callable[[Any], Optional[Who]]) -> Optional[Who]:
    """An unattributed quote's speaker from what precedes it (``gap``: the narration since
    the quote before, ``found[i - 1]``; ``taken``: nothing else came between them)."""
    before = found[i - 1] if i else None
    if before is not None and taken:
        # a new turn of the conversation: the one spoken to answers, or the one before
        two_back = found[i - 2].speaker if i > 1 else None
        return before.listener or (two_back if two_back != before.speaker else None)
    if before is not None and not any(tok.text in _ENDS for tok in gap):
        return before.speaker  # interrupted by narration without a sentence end
    # the subject of the narration just before: "Anne smiled. 'I know.'"
    last = len(gap)
    while last and (gap[last - 1].text in _ENDS or gap[last - 1].is_space):
        last -= 1
    sentence = _before(gap[:last])
    subjects = [who(tok) for tok in sentence if tok.dep_ in ("nsubj", "nsubjpass")]
    return next((s for s in reversed(subjects) if s is not None), None)


def _vocative(doc: Any, quote: Quote, who: Callable[[Any], Optional[Who]]) -> Optional[Who]:
    """A person called by name in the quote, set off by its marks or commas ("Mr. Bennet,
    ...", "..., Anne!")."""
    for i in range(quote.start, quote.end):
        person = who(doc[i])
        if person is None or doc[i].lower_ in FIRST_PERSON | SECOND_PERSON:
            continue
        first, last = i, i + 1  # the name's entity around it, from the IOB tags
        while doc[first].ent_iob_ == "I" and first > quote.start:
            first -= 1
        while last < quote.end and doc[last].ent_iob_ == "I":
            last += 1
        lead = first - 1
        while lead >= quote.start and doc[lead].lower_ in _VOCATIVE_LEAD:
            lead -= 1
        opened = lead < quote.start or doc[lead].text == ","
        closed = last >= quote.end or doc[last].text in (",", "!", "?", ".")
        if opened and closed and doc[i].dep_ not in ("nsubj", "nsubjpass", "dobj", "pobj"):
            return person
    return None
