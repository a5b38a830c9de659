"""LitBank's results as markdown: the ``## LitBank`` section of ``docs/benchmarks.md``, also
saved as ``benchmarks/results/litbank.md`` so that regenerating the whole report
(``python -m benchmarks full``) keeps it (``benchmarks.report`` reads that file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.litbank.loader import CATEGORIES, TYPES

HEADING = "## LitBank"
RESULTS_MD = Path(__file__).resolve().parents[1] / "results" / "litbank.md"
#: what a person read in the figures; shown under them until it is rewritten
FINDINGS_MD = RESULTS_MD.with_name("litbank-findings.md")
#: the issue's targets: coreference and event margins over the best baseline, PER head F1
COREF_MARGIN, EVENT_MARGIN, PER_HEAD_F1 = 0.15, 0.20, 0.80


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _systems_with(results: dict[str, Any], part: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, s) for name, s in results["systems"].items() if part in s]


def render(results: dict[str, Any]) -> str:
    """The section: provenance, definitions, one table per measure, the targets."""
    m = results["machine"]
    commit = f", commit `{m['git_commit']}`" if m.get("git_commit") else ""
    out = [HEADING, "",
           f"*`{results['command']}` · {m['date_utc']}{commit} · {m['nproc']} cores, "
           f"{m['cpu']} · "
           f"{len(results['works'])} works, {results['words']:,} tokens · "
           f"{results['wall_seconds'] / 60:.1f} min in all (spaCy parse of the texts for the "
           f"baselines and heads {results['parse_seconds']:.0f} s)*", "",
           "Time per system (build or run, read back, scoring), all works: " + ", ".join(
               f"`{name}` {s['seconds']:.0f} s" for name, s in results["systems"].items()) + ".",
           "", *_definitions(), ""]
    mentions = _systems_with(results, "mentions")
    out += ["### Mentions (type-aware, all six types)", "",
            "| system | exact P | exact R | exact F1 | head P | head R | head F1 | untyped head "
            "F1 | predicted (typed / all) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, s in mentions:
        e, h = s["mentions"]["exact"]["overall"], s["mentions"]["head"]["overall"]
        u = s["mentions"]["head"]["untyped"]
        out.append(f"| {name} | {_f(e['p'])} | {_f(e['r'])} | {_f(e['f1'])} | {_f(h['p'])} | "
                   f"{_f(h['r'])} | {_f(h['f1'])} | {_f(u['f1'])} | "
                   f"{h['pred']:,} / {u['pred']:,} |")
    for part, names, title in (("by_type", TYPES, "type"), ("by_category", CATEGORIES,
                                                             "category")):
        out += ["", f"Per {title}: F1 exact / head (gold mentions in brackets).", "",
                f"| {title} | " + " | ".join(n for n, _ in mentions) + " |",
                "|---|" + "---|" * len(mentions)]
        for key in names:
            gold = mentions[0][1]["mentions"]["head"][part][key]["gold"] if mentions else 0
            cells = [f"{_f(s['mentions']['exact'][part][key]['f1'])} / "
                     f"{_f(s['mentions']['head'][part][key]['f1'])}" for _, s in mentions]
            out.append(f"| {key} ({gold:,}) | " + " | ".join(cells) + " |")
    out += ["", "### Event triggers (token level)", "", "| system | P | R | F1 | predicted |",
            "|---|---|---|---|---|"]
    for name, s in _systems_with(results, "events"):
        ev = s["events"]
        out.append(f"| {name} | {_f(ev['p'])} | {_f(ev['r'])} | {_f(ev['f1'])} | "
                   f"{ev['pred']:,} |")
    out += ["", "### Coreference", "",
            "| system | mentions | MUC F1 | B³ F1 | CEAF-e F1 | average F1 |",
            "|---|---|---|---|---|---|"]
    for rule in ("exact", "head"):
        for name, s in mentions:
            c = s["coref"][rule]
            out.append(f"| {name} | {rule} | {_f(c['muc']['f1'])} | {_f(c['b3']['f1'])} | "
                       f"{_f(c['ceafe']['f1'])} | {_f(c['avg_f1'])} |")
    out += ["", "P / R of each metric are in `benchmarks/results/litbank.json`.", ""]
    chains = _systems_with(results, "chains")
    if chains:
        out += ["### Timeline chains", "",
                "| system | PER chains ≥ 5 | without a name | named | unresolved | followed | "
                "share followed | mean coverage | mean precision |",
                "|---|---|---|---|---|---|---|---|---|"]
        for name, s in chains:
            c = s["chains"]
            out.append(f"| {name} | {c['chains']} | {c['no_name']} | {c['named']} | "
                       f"{c['unresolved']} | {c['met']} | {_f(c['share_met'])} | "
                       f"{_f(c['mean_coverage'])} | {_f(c['mean_precision'])} |")
        out.append("")
    out += _targets(results)
    if FINDINGS_MD.is_file():
        out += ["#### Findings (written by hand from the run above: `benchmarks/results/"
                f"{FINDINGS_MD.name}`)", "", FINDINGS_MD.read_text(encoding="utf-8").strip(), ""]
    return "\n".join(out).rstrip() + "\n"


def _definitions() -> list[str]:
    return [
        "LitBank (Bamman et al. 2019, 2020; Sims et al. 2019): ~2,000 words from the start of "
        "each work, every mention of a person, facility, place, political entity, vehicle or "
        "organisation (proper, nominal, pronoun; nested ones too), their coreference chains "
        "(singletons included) and realis event triggers. `python -m benchmarks litbank "
        "[--data-root DIR] [--works N] [--only ID ...]` reads any folder laid out like "
        "`shared/data/litbank` (`--render-only` rewrites this section from the saved JSON).",
        "",
        "- **Text fed to a system**: each sentence line's tokens joined by single spaces, "
        "sentences joined by newlines; gold token positions become character offsets of that "
        "text.",
        "- **Systems**: `project` is the offline default (`E2RAGIndex.from_documents`, grounded "
        "spaCy extraction, MiniLM, no LLM) with `EventGraphBuilder`, whose fused entities "
        "`e2rag timeline` reads (the other optional layers add no mention or event and are "
        "not built): every occurrence of every mention node is a mention, its fused "
        "entity its chain, each realis event's verb a trigger. Baselines on one spaCy parse (the "
        "project's model): `spacy-ner` (entity spans, each alone), `exact-name` (those spans "
        "chained by identical name and type), `name+pronoun` (plus he/him/his/himself and "
        "she/her/hers/herself as PER mentions joined to the nearest preceding PERSON name whose "
        "title's gender does not conflict), `every-verb` (every token tagged VERB).",
        "- **Types**: PERSON→PER; GPE, LOC, FAC, ORG as they are; NORP, dates, numbers and the "
        "project's untyped argument mentions (`concept`) are no LitBank type; nothing predicts "
        "VEH. A prediction counts for a type only when its type is that type; *untyped* counts "
        "every prediction against every gold mention.",
        "- **Mention matching**: *exact* = same character span and type; *head* = same head "
        "token and type, one to one. Head = spaCy's syntactic head (span root) of the span in "
        "one parse of the whole text, for gold and predicted spans alike (the last token when "
        "a span does not align to the parse). Per category, a matched prediction counts in its "
        "gold mention's category, an unmatched one by its head's part of speech (PRON, PROPN → "
        "PROP, else NOM).",
        "- **Events**: token-level P/R/F1 over the tokens marked EVENT; a predicted trigger is "
        "the token its first character falls in.",
        "- **Coreference**: MUC, B³, CEAF-e (φ4) by the `scorch` package's formulas (tested "
        "against the reference scorer's test cases in `tests/benchmarks/"
        "test_litbank_scoring.py`), pooled over works as the CoNLL reference scorer pools "
        "(summed numerators and denominators); average = the mean of the three F1s. Key: every "
        "gold mention with its chain (a mention without a COREF row is its own entity). "
        "Response: a system's typed mentions grouped by chain; twinless mentions are kept on "
        "both sides. *exact*: mentions are identified by their span; *head*: a predicted "
        "mention whose head matches a gold mention's (one to one, any type) stands for it.",
        "- **Timeline chains**: for each gold PER chain with ≥ 5 mentions, its most frequent "
        "proper-name mention is looked up as `e2rag timeline NAME` does "
        "(`context.timeline.entity_timeline`); *followed* when the entity's mentions cover ≥ "
        "80 % of the chain's (head match) and ≥ 80 % of them are in the chain. An unknown or "
        "ambiguous name fails; chains with no proper name cannot be looked up and are counted "
        "apart (the share is over named chains).",
    ]


def _targets(results: dict[str, Any]) -> list[str]:
    """The issue's targets against this run (issue 25, part 4, item 1)."""
    systems = results["systems"]
    project = systems.get("project")
    if project is None or "mentions" not in project:
        return []
    rows: list[tuple[str, float, bool | None]] = []
    for rule in ("exact", "head"):
        best_name, best = max(((n, s["coref"][rule]["avg_f1"]) for n, s in systems.items()
                               if n != "project" and "coref" in s), key=lambda x: x[1],
                              default=(None, 0.0))
        got = project["coref"][rule]["avg_f1"]
        rows.append((f"coreference average F1 ({rule}) ≥ best baseline ({best_name}, "
                     f"{_f(best)}) + {COREF_MARGIN:.2f}", got, got >= best + COREF_MARGIN))
    per = project["mentions"]["head"]["by_type"]["PER"]["f1"]
    rows.append((f"PER mention F1 (head) ≥ {PER_HEAD_F1:.2f}", per, per >= PER_HEAD_F1))
    verbs = systems.get("every-verb", {}).get("events")
    if verbs is not None and "events" in project:
        got = project["events"]["f1"]
        rows.append((f"event-trigger F1 ≥ every-verb ({_f(verbs['f1'])}) + {EVENT_MARGIN:.2f}",
                     got, got >= verbs["f1"] + EVENT_MARGIN))
    if "chains" in project:
        c = project["chains"]
        rows.append((f"share of named gold PER chains (≥ 5 mentions) their timeline follows "
                     f"({c['met']} of {c['named']})", c["share_met"], None))
    out = ["### Targets (issue 25, part 4)", "", "| target | project | met |", "|---|---|---|"]
    verdict = {True: "yes", False: "no", None: "reported"}
    out += [f"| {what} | {_f(value)} | {verdict[ok]} |" for what, value, ok in rows]
    return out + [""]


def splice(document: str, section: str) -> str:
    """``document`` with its LitBank section replaced by ``section`` (placed before
    ``## Method`` when there is none yet, else at the end)."""
    lines = document.split("\n")
    new = section.rstrip("\n").split("\n") + [""]
    if HEADING in lines:
        start = lines.index(HEADING)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        return "\n".join(lines[:start] + new + lines[end:])
    if "## Method" in lines:
        at = lines.index("## Method")
        return "\n".join(lines[:at] + new + lines[at:])
    return document.rstrip("\n") + "\n\n" + "\n".join(new)


def saved_section() -> list[str]:
    """The last run's section, for the whole report (none before the first run)."""
    if not RESULTS_MD.is_file():
        return []
    return RESULTS_MD.read_text(encoding="utf-8").rstrip("\n").split("\n") + [""]
