"""Every mode's score on one scale: 0 to 1, higher is better, comparable across questions.

LlamaIndex users compare ``NodeWithScore.score`` with a number (``SimilarityPostprocessor``'s
``similarity_cutoff``) and across retrievers (``QueryFusionRetriever``'s ``simple`` mode keeps the
higher score). Both need a scale that means the same for every question and every retriever.

* **Cosine-based modes** (``vector``, ``entity_event``, ``grounded``, ``chrono``,
  ``sentence_graph``, ``event_graph``): their raw score is a cosine similarity (or a mean of
  cosines, or a cosine decayed along a path), so the score is that cosine clipped to [0, 1]: the
  same number a ``VectorStoreIndex`` with the same embedding reports for the same match, and
  the same order (a negative cosine, an anti-match, becomes 0).
* **``narrative``**: its raw score is a sum of weighted z-scores (standardised over the story's
  passages) plus graph bonuses, roughly −1 to 6. A z-score says how a passage stands among the
  story's passages, not whether the story answers the question at all: an off-topic question
  still has a "best" passage with a high z-sum. The score is put on the cosine scale of the
  other modes: **the cosine at which a chunk found by a vector search of the same index is as
  likely to hold the evidence**. Two logistic regressions fitted on FairytaleQA *train*
  (``benchmarks/fit_scores.py``; relevant = the result quotes the question's gold section, with
  as many off-topic questions, another story's asked of this one, as on-topic ones) give
  ``P(relevant)`` of a narrative result and of a ``vector``-mode chunk from its cosine;
  composing them is linear:
  ``score = clip(NARRATIVE_RAW·raw + NARRATIVE_MATCH·story_match + NARRATIVE_RANK·log(rank)
  + NARRATIVE_BIAS, 0, 1)``, where

  - ``raw`` is the raw score of the result's *hit*: its own, or for a continuation (the passage
    after a strong hit, returned right after it) the hit's. On FairytaleQA train the passage
    after the best hit quotes the gold section 58 % of the time, next to the hit's 67 % and far
    above the next hit's 28 %, while its own raw score is often below every other result's;
  - ``story_match`` is the question's best cosine with any passage (how much the story has to
    say about the question at all; one number per question);
  - ``rank`` is the result's 1-based place in the ranking (continuations included): the 6th
    passage of a story that matches the question closely is less likely to hold the evidence
    than the 1st, whatever its raw sum.

  With ``NARRATIVE_RAW > 0`` and ``NARRATIVE_RANK ≤ 0`` (the fit checks both) scores never rise
  down the list: a continuation scores at most its hit and at least the next hit, the order is
  the ranking's own. A narrative score of 0.5 is as good a sign as a chunk cosine of 0.5
  (``vector`` mode, or a ``VectorStoreIndex`` chunking alike with the same embedding), so a
  cutoff and ``QueryFusionRetriever`` treat both alike. Cosines depend on the length of what is
  embedded (a 30-word passage matches a question more closely than a 200-word chunk), which is
  why the anchor is the chunk, not the passage.
  A per-question min-max would put every question's top passage at 1.0 and make a cutoff
  meaningless.

The raw value stays in ``metadata["signals"]["raw_score"]`` (``StoresRetriever`` keeps it).
"""

from __future__ import annotations

import math

#: The narrative mode's score on the cosine scale (see the module docstring); fitted with
#: ``python -m benchmarks.fit_scores`` for the shipped ``NarrativeWeights``: refit them together.
NARRATIVE_RAW, NARRATIVE_MATCH, NARRATIVE_RANK, NARRATIVE_BIAS = 0.0661, 0.9599, -0.0510, -0.1983


def cosine_score(raw: float) -> float:
    """A cosine (or a blend of cosines) on the 0-1 scale: clipped, otherwise unchanged."""
    return min(1.0, max(0.0, float(raw)))


def narrative_score(hit_raw: float, story_match: float, rank: int) -> float:
    """A narrative result as the cosine of equal relevance, clipped to 0-1: ``hit_raw`` is the
    raw score of its hit (a continuation's parent's), ``rank`` its 1-based place."""
    return cosine_score(
        NARRATIVE_RAW * hit_raw
        + NARRATIVE_MATCH * story_match
        + NARRATIVE_RANK * math.log(max(rank, 1))
        + NARRATIVE_BIAS
    )
