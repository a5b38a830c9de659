"""Whether two sets of name groups hold a pair in conflict, from a summary of each set.

Fusion joins sets of groups (``fusion.fuse``) and refuses a join when any group of one set is in
conflict with any group of the other (``fusion.in_conflict``). Checking every pair grew with the
product of the sets' sizes: on a million-word novel a set of thousands of common nouns met
thousands of candidates, the builder ran for a quarter of an hour and its memo of checked pairs
took gigabytes. Each rule of ``in_conflict`` asks whether *some* pair differs in one feature, so
the features each set holds answer it exactly, whatever the sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol


class NameGroup(Protocol):
    """What is read of a ``fusion.Group`` (named here so the two modules form no cycle)."""

    @property
    def parts(self) -> tuple[tuple[str, ...], frozenset[str], bool, Optional[str]]: ...

    @property
    def nominal(self) -> bool: ...


@dataclass
class SetConflicts:
    """What ``in_conflict`` reads of each group of a set, pooled over the set."""

    types: set[str] = field(default_factory=set)  # known type keys
    nominal: set[bool] = field(default_factory=set)  # named by a noun phrase or not
    genders: set[frozenset[str]] = field(default_factory=set)  # non-empty title genders
    firsts: dict[str, set[str]] = field(default_factory=dict)  # token -> first tokens of the
    # multi-word person names holding it
    cores: set[tuple[str, ...]] = field(default_factory=set)
    ambiguous: set[tuple[str, ...]] = field(default_factory=set)  # cores of one ambiguous token

    @classmethod
    def of(cls, group: NameGroup, ambiguous_tokens: frozenset[str]) -> "SetConflicts":
        core, genders, person, type_key = group.parts
        summary = cls(nominal={group.nominal}, cores={core})
        if type_key is not None:
            summary.types.add(type_key)
        if genders:
            summary.genders.add(genders)
        if person and len(core) > 1:
            for token in core:
                summary.firsts.setdefault(token, set()).add(core[0])
        if len(core) == 1 and core[0] in ambiguous_tokens:
            summary.ambiguous.add(core)
        return summary

    def clashes(self, other: "SetConflicts") -> bool:
        """Whether some group of this set and some group of ``other`` are in conflict."""
        if self.types and other.types and len(self.types | other.types) > 1:
            return True  # two known types differ
        if len(self.nominal | other.nominal) > 1:
            return True
        if any(not a & b for a in self.genders for b in other.genders):
            return True
        small, large = sorted((self.firsts, other.firsts), key=len)
        if any(len(firsts | large[token]) > 1 for token, firsts in small.items() if token in large):
            return True  # "Vernon Dursley" / "Petunia Dursley"
        return any(
            len(others.cores) > 1 or core not in others.cores
            for one, others in ((self, other), (other, self))
            for core in one.ambiguous
        )

    def absorb(self, other: "SetConflicts") -> None:
        """Pool ``other``'s groups into this set's summary."""
        self.types |= other.types
        self.nominal |= other.nominal
        self.genders |= other.genders
        for token, firsts in other.firsts.items():
            self.firsts.setdefault(token, set()).update(firsts)
        self.cores |= other.cores
        self.ambiguous |= other.ambiguous
