"""The test story: one character whose facet changes between an early and a late chunk."""

from __future__ import annotations

PARAGRAPHS = [
    "Hermione Granger arrived at Hogwarts as a rule-obsessed first-year. "
    "Hermione Granger scolded Ron Weasley for ignoring the library rules.",
    "Ron Weasley mocked Hermione Granger after the Charms lesson. "
    "Hermione Granger cried alone in the bathroom until the troll came.",
    "Months later Hermione Granger set fire to the robes of Severus Snape at the Quidditch match. "
    "Hermione Granger was breaking the rules to save Harry Potter from the jinxed broom.",
]
STORY = "\n\n".join(PARAGRAPHS)
SECOND_STORY = (
    "Neville Longbottom lost his toad Trevor on the train. "
    "Neville Longbottom searched every compartment for Trevor."
)
#: A question about Hermione's later facet: the answer is only in the last paragraph.
LATE_FACET_QUERY = "Why did Hermione Granger break the rules at the Quidditch match?"
INSERT_KWARGS = {"split_by_character": "\n\n", "split_by_character_only": True}
