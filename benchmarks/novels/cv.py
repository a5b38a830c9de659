"""Book-level cross-validation of a grid of configurations (the protocol's folds A and B).

The configuration with the best objective on the books of fold A is reported on the books of
fold B, and the one best on B is reported on A; the two reports are pooled per question over
every book the run covers ("cross-validated") and broken down by length third, each against the
hybrid baseline on the same questions. Ties go to the earlier configuration of the grid, so list
the shipped default first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from benchmarks.protocol import FOLDS, HYBRID, BookPlace, Row, by_third, pooled

CROSS_VALIDATED = "cross-validated"
#: What a fold's choice maximises: the ATR ratio, or the mean of the ATR and time-question ATR
#: ratios (so time questions are not bought at the others' expense, or the reverse).
OBJECTIVES = ("atr", "atr+time")


def objective(figures: Mapping[str, Any], name: str) -> float | None:
    """The objective's value for ``pooled`` figures (``None`` when undefined)."""
    atr, time = figures.get("atr_vs_hybrid"), figures.get("atr_time_vs_hybrid")
    if name == "atr":
        return atr
    if name == "atr+time":
        return None if atr is None or time is None else (atr + time) / 2
    raise ValueError(f"unknown objective {name!r}; choose from {OBJECTIVES}")


def cross_validate(rows: Sequence[Row], places: Mapping[str, BookPlace],
                   grid: Sequence[str], goal: str = "atr") -> dict[str, Any]:
    """Choose on one fold, report on the other, both ways; pooled and per third."""
    base = [r for r in rows if r.system == HYBRID]
    folds: dict[str, Any] = {}
    reported: list[Row] = []
    for fit, other in (FOLDS, FOLDS[::-1]):
        inside = {r.doc_id for r in base if places[r.doc_id].fold == fit}
        if not inside or not any(places[r.doc_id].fold == other for r in base):
            raise ValueError("cross-validation needs evaluated books in both folds")
        fit_base = [r for r in base if r.doc_id in inside]
        scores = {name: objective(pooled([r for r in rows if r.system == name
                                          and r.doc_id in inside], fit_base), goal)
                  for name in grid}
        defined = [name for name in grid if scores[name] is not None]
        if not defined:
            raise ValueError(f"no configuration has a defined {goal} objective on fold {fit}")
        best = max(defined, key=lambda name: scores[name])
        chosen = [r for r in rows if r.system == best and places[r.doc_id].fold == other]
        reported += [replace(r, system=CROSS_VALIDATED) for r in chosen]
        folds[fit] = {"chosen": best, "objective_on_fit": scores[best],
                      "reported_on": other, "fit_scores": scores,
                      "books_fit": len(inside),
                      "report": pooled(chosen, [r for r in base if places[r.doc_id].fold == other])}
    return {"objective": goal, "folds": folds, "by_third": by_third([*reported, *base], places)}
