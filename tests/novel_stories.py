"""Original novel-like stories for the anchoring tests, generated from varied sentence templates.

Each story has chapters with headings ("CHAPTER IV. The Letter"), a family sharing a surname
("Mr. Hale", "Mrs. Hale", "Margaret Hale") and other characters with titles, and one heroine with
two facets: an **early facet** (before a clearly named incident) and a **later facet** that comes
``gap_words`` words after the incident, in a later chapter. Between them runs ordinary narrative
filler, drawn by a seeded random generator from many templates (never one repeated line), in
which the heroine and her family come and go as they do in a book.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llama_index_e2rag.text import count_words


@dataclass(frozen=True)
class Variant:
    """One story: its people, its incident, the heroine's two facets and the questions."""

    name: str
    surname: str
    heroine: str
    father: str
    mother: str
    others: tuple[str, ...]
    places: tuple[str, ...]
    incident: str  # the incident's name, as the questions say it
    incident_scene: str
    early: str
    later: str
    after_question: str
    before_question: str
    plain_question: str  # no time word
    weak_question: str  # a time word whose clause names nothing in the story
    gap_words: int


@dataclass(frozen=True)
class Story:
    variant: Variant
    text: str
    early_at: int
    incident_at: int
    later_at: int


VARIANTS = (
    Variant(
        name="hale",
        surname="Hale",
        heroine="Margaret",
        father="Mr. Hale",
        mother="Mrs. Hale",
        others=("Mr. Thornton", "Dixon", "Nicholas Higgins", "Bessy Higgins", "Mrs. Thornton"),
        places=("the parlour", "the mill yard", "Marlborough Street", "the vicarage garden",
                "the station", "the market"),
        incident="the fire at the mill",
        incident_scene=(
            "That was the night of the fire at the mill. The fire at the mill began a little "
            "after midnight in the carding room, and by one o'clock the whole east wing was "
            "burning. Margaret Hale stood in the yard with a bucket in her hands while the roof "
            "fell in, and she did not move until Mr. Thornton led her away."
        ),
        early=(
            "Margaret Hale was known in the household for keeping every rule. She never broke "
            "a rule of the house: she was home before the curfew bell, she never opened her "
            "father's study without leave, and she scolded Dixon for taking the short cut "
            "through the churchyard, which was against the rules. Rules, she said, kept a "
            "family decent, and she would never break one."
        ),
        later=(
            "Margaret now broke the rules of the house without a second thought. She stayed out "
            "long past the curfew bell, she opened her father's locked study and read his "
            "letters, and she took the forbidden short cut through the churchyard every night. "
            "Dixon watched her break rule after rule and said nothing."
        ),
        after_question="What rules did Margaret break after the fire at the mill?",
        before_question="Which rules did Margaret keep before the fire at the mill?",
        plain_question="Which rules of the house did Margaret break?",
        weak_question="What rules did Margaret break after the balloon race?",
        gap_words=2000,
    ),
    Variant(
        name="marsh",
        surname="Marsh",
        heroine="Eleanor",
        father="Captain Marsh",
        mother="Mrs. Marsh",
        others=("Mr. Pell", "Aunt Judith", "Tom Greaves", "Dr. Fenwick", "Mrs. Greaves"),
        places=("the harbour wall", "the chapel", "the lighthouse steps", "the fish market",
                "the upstairs room", "the coast road"),
        incident="the wreck of the Albatross",
        incident_scene=(
            "Then came the wreck of the Albatross. The Albatross struck the rocks below Gull "
            "Point in the storm, and the wreck of the Albatross drowned eleven men within sight "
            "of the town. Eleanor Marsh held the lantern on the cliff until dawn, and Captain "
            "Marsh came home soaked and silent."
        ),
        early=(
            "Eleanor Marsh never told a lie. Everyone on the coast road knew it: when Tom "
            "Greaves broke the chapel window she told the minister the truth, and when Aunt "
            "Judith asked whether the pie was burnt she said that it was. A lie, Eleanor held, "
            "was a small theft, and she would never tell one."
        ),
        later=(
            "Eleanor lied now as easily as she breathed. She lied to Aunt Judith about where "
            "she spent her evenings, she told Dr. Fenwick a false name, and she lied to her own "
            "father about the letters hidden in her sewing box. Each lie came more easily than "
            "the last."
        ),
        after_question="What lies did Eleanor tell after the wreck of the Albatross?",
        before_question="How truthful was Eleanor before the wreck of the Albatross?",
        plain_question="What lies did Eleanor tell?",
        weak_question="What lies did Eleanor tell after the county election?",
        gap_words=3500,
    ),
    Variant(
        name="vane",
        surname="Vane",
        heroine="Clara",
        father="Sir Robert Vane",
        mother="Lady Vane",
        others=("Mr. Ashdown", "Miss Pruett", "Colonel Byrne", "Hetty", "Mr. Quill"),
        places=("the long gallery", "the orchard", "the stables", "the village church",
                "the drawing room", "the lodge gates"),
        incident="the duel in the orchard",
        incident_scene=(
            "It was at dawn that the duel in the orchard took place. Colonel Byrne and Mr. "
            "Ashdown faced each other under the pear trees, and when the duel in the orchard was "
            "over Mr. Ashdown lay wounded in the wet grass. Clara Vane had watched it all from "
            "the gallery window."
        ),
        early=(
            "Clara Vane spent nothing she did not need. She kept her pin money in a locked box, "
            "she mended her own gloves rather than buy new ones, and she lectured Hetty on "
            "thrift. To spend money on finery, Clara said, was the surest road to ruin, and she "
            "would never do it."
        ),
        later=(
            "Clara spent money now as if it burned her hands. She bought a silk gown and a "
            "hat with ostrich plumes in the county town, she paid a jeweller for a ring she "
            "never wore, and she spent her whole allowance on a grey mare. Hetty kept the bills "
            "hidden under the lodge stairs."
        ),
        after_question="What did Clara spend money on after the duel in the orchard?",
        before_question="How did Clara treat money before the duel in the orchard?",
        plain_question="What did Clara spend money on?",
        weak_question="What did Clara spend money on after the harvest fair?",
        gap_words=1200,
    ),
)

_CHAPTER_TITLES = ("A Letter", "Visitors", "Rain", "The Road", "An Errand", "Evening",
                   "Old Friends", "The Market", "News", "A Walk", "The Doctor", "Sunday",
                   "A Quarrel", "Winter", "The Garden", "Accounts")
_TIMES = ("in the morning", "after breakfast", "towards noon", "in the afternoon",
          "before supper", "that evening", "on the following day", "late on Tuesday",
          "at the end of the week", "when the rain stopped")
_OBJECTS = ("a basket of apples", "a bundle of letters", "the newspaper", "a borrowed umbrella",
            "a parcel of books", "a jug of milk", "her sewing", "a lamp", "the accounts",
            "a loaf of bread", "a pair of gloves", "a list of errands")
_WEATHER = ("A grey drizzle hung over the town.", "The wind came in from the east, sharp and "
            "cold.", "It was one of those pale, still days that end early.", "The streets "
            "were dusty and bright.", "Fog lay over the chimneys until noon.", "A thin sun "
            "came and went behind the clouds.")
_TEMPLATES = (
    "{a} walked to {place} {time}, carrying {obj}.",
    "{time_cap}, {a} and {b} sat together in {place} and talked of nothing in particular.",
    "{a} wrote a long letter to {b} and then tore it up.",
    "{a} said that the price of coal had risen again, and {b} agreed that it was shameful.",
    "Nobody at {place} had seen {a} since the spring.",
    "{a} met {b} on the way to {place}; they nodded, and neither stopped.",
    "{a} spent a whole afternoon in {place} sorting {obj}.",
    "There was a rumour at {place} that {a} meant to leave the town before winter.",
    "{a} laughed at something {b} said, though {b} had not meant it as a joke.",
    "{a} brought {obj} to {place} and left it on the table for {b}.",
    "{time_cap}, {a} read aloud to {b} from an old book of sermons.",
    "{a} had a cold and stayed in {place}, complaining to anyone who would listen.",
    "{a} asked {b} about the new curate, and {b} had a great deal to say.",
    "The clock in {place} had stopped, and {a} wound it with great care.",
    "{a} counted the money twice and found it a shilling short.",
    "{b} called on {a} {time} but found the house empty.",
    "{a} thought that {b} looked tired, but did not say so.",
    "At {place} the talk was all of the weather and the harvest.",
    "{a} kept {obj} in a drawer and took it out only on Sundays.",
    "{a} and {b} quarrelled briefly about the carriage, and made it up over tea.",
    "{a} watched the carts go by from the window of {place}.",
    "{time_cap}, {a} went to see {b} and stayed for an hour.",
    "{b} sent {a} a note asking for {obj}, and {a} sent it at once.",
    "{a} was silent all through dinner, and {b} did not press her.",
)


def _sentence(rng: random.Random, v: Variant, template: str) -> str:
    """One sentence of filler: two of the cast (the family more often) somewhere, doing
    something ordinary."""
    family = [v.father, v.mother, f"{v.heroine} {v.surname}"]
    cast = [*v.others, *family, *family, v.heroine]
    a, b = rng.sample(cast, 2)
    while _person(v, a) == _person(v, b):  # two people, never one by two of her names
        a, b = rng.sample(cast, 2)
    time = rng.choice(_TIMES)
    return template.format(
        a=a, b=b, place=rng.choice(v.places), obj=rng.choice(_OBJECTS), time=time,
        time_cap=time[0].upper() + time[1:],
    )


def _person(v: Variant, name: str) -> str:
    return v.heroine if name == f"{v.heroine} {v.surname}" else name


def _filler(rng: random.Random, v: Variant, words: int) -> list[str]:
    """Paragraphs of ordinary narrative, about ``words`` words."""
    paragraphs, total = [], 0
    while total < words:
        sentences = [rng.choice(_WEATHER)] if rng.random() < 0.3 else []
        for template in rng.sample(_TEMPLATES, rng.randint(4, 7)):
            sentences.append(_sentence(rng, v, template))
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        total += count_words(paragraph)
    return paragraphs


def build(v: Variant, seed: int = 0) -> Story:
    """The story of ``v``: chapters of filler around the early facet, the incident and the
    later facet, ``v.gap_words`` of filler between the incident and the later facet."""
    rng = random.Random(f"{v.name}-{seed}")
    titles = list(_CHAPTER_TITLES)
    rng.shuffle(titles)
    chapters: list[list[str]] = []
    chapters.append(_filler(rng, v, 500))
    chapters.append(_filler(rng, v, 250) + [v.early] + _filler(rng, v, 350))
    chapters.append(_filler(rng, v, 700))
    chapters.append(_filler(rng, v, 300) + [v.incident_scene] + _filler(rng, v, 300))
    gap, per_chapter = v.gap_words - 300, 700
    while gap > per_chapter + 200:
        chapters.append(_filler(rng, v, per_chapter))
        gap -= per_chapter
    chapters.append(_filler(rng, v, gap) + [v.later] + _filler(rng, v, 300))
    chapters.append(_filler(rng, v, 600))
    parts = []
    for number, paragraphs in enumerate(chapters, start=1):
        parts.append(f"CHAPTER {_roman(number)}. {titles[number % len(titles)]}")
        parts.extend(paragraphs)
    text = "\n\n".join(parts) + "\n"
    return Story(v, text, text.index(v.early), text.index(v.incident_scene), text.index(v.later))


def _roman(n: int) -> str:
    numerals = ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))
    out = ""
    for value, letter in numerals:
        while n >= value:
            out, n = out + letter, n - value
    return out
