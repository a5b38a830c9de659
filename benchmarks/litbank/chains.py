"""The timeline chain-coverage metric: does ``e2rag timeline NAME`` follow a character?

For every gold PER chain with at least ``MIN_MENTIONS`` mentions, its most frequent proper-name
mention (ties: the earliest) is looked up the way the timeline looks names up. Coverage is the
share of the chain's mentions that the resolved entity's mentions match by head (one to one);
precision is the share of the entity's mentions that are in the chain. A chain is followed when
both are at least ``THRESHOLD``; an unknown or ambiguous name fails. A chain without any proper
name (a narrator "I", "the old man") cannot be looked up by name: it is counted apart.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Optional

from benchmarks.litbank.loader import GoldMention, Work
from benchmarks.litbank.scoring import head_only_key, match

if TYPE_CHECKING:
    from benchmarks.litbank.evaluate import Heads

MIN_MENTIONS = 5
THRESHOLD = 0.8


@dataclass(frozen=True)
class ChainResult:
    """One gold chain against the entity its name resolves to."""

    work_id: str
    chain: str
    mentions: int
    name: Optional[str]
    status: Literal["resolved", "unresolved", "no name"]
    coverage: float = 0.0
    precision: float = 0.0

    @property
    def met(self) -> bool:
        return self.coverage >= THRESHOLD and self.precision >= THRESHOLD


def chain_coverage(work: Work, heads: "Heads",
                   resolve: Callable[[str], Optional[list[tuple[int, int]]]]) -> list[ChainResult]:
    """Every long gold PER chain of ``work`` against ``resolve(its name)``."""
    chains: dict[str, list[GoldMention]] = defaultdict(list)
    for mention in work.mentions:
        if mention.type == "PER":
            chains[mention.chain].append(mention)
    out = []
    for chain, members in chains.items():
        if len(members) < MIN_MENTIONS:
            continue
        names = Counter(m.text for m in members if m.category == "PROP")
        if not names:
            out.append(ChainResult(work.work_id, chain, len(members), None, "no name"))
            continue
        name = names.most_common(1)[0][0]
        spans = resolve(name)
        if spans is None:
            out.append(ChainResult(work.work_id, chain, len(members), name, "unresolved"))
            continue
        gold = [heads.gold(m) for m in members]
        found = [heads.item(start, end, None) for start, end in spans]
        pairs = len(match(gold, found, head_only_key))
        out.append(ChainResult(work.work_id, chain, len(members), name, "resolved",
                               pairs / len(gold), pairs / len(found) if found else 0.0))
    return out
