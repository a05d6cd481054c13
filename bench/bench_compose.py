"""How quote mode's answers read, before and after a change to their composition (issue 33: answer first).

    .venv/bin/python bench/bench_compose.py --before bench/data/quote_bd7c8c2/runs [--after DIR] [--rerun]

Composition changes which units an answer quotes, in what order and with which marks; it never changes whether a
question is answered (the decision reads the reader's scores, not the text). So the same question sets are asked
with this checkout (`--rerun`, or the runs already in `--after`) and compared with the runs of the commit before
the change (made with bench/baselines.sh, which asks every set with an older commit's code). Per set: right
answers, and the answers' shape — whether the answer opens with the unit the reader ranked best, citation marks
per source, answers ending on a colon, length. Judged sets are only scored here, never read to tune.

Writes bench/results/compose.json; bench/report.py puts it in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

import quote_data
from _common import ROOT, write_result
from citewise.agent.grounding import cited_numbers

AFTER = quote_data.DATA / "compose_after"
# The docs sets, and the rejection sets made from the judged ones (their answering pages removed).
SETS = [n for n, s in quote_data.SETS.items() if s.distribution == "docs"]
SETS += [n for n in quote_data.SETS if n.endswith("_rejection")]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"\[\d+\]", " ", text).split())


def shape(rows: list[dict]) -> dict:
    """Right answers, and how the answered ones read."""
    answerable = [r for r in rows if r["answerable"]]
    answered = [r for r in rows if r["status"] == "success" and r["answer"]]
    marks, per_source, chars, colon, first = [], [], [], 0, 0
    for r in answered:
        text = r["answer"]
        numbers = cited_numbers(text)
        marks.append(len(numbers))
        per_source.append(len(numbers) / max(1, len(set(numbers))))
        chars.append(len(text))
        colon += _norm(text).rstrip().endswith(":")
        best = _norm(r["parts"][0].get("best", "")) if r.get("parts") else ""
        opening = _norm(text.split("\n\n", 1)[0]) + " " + _norm(text.split("\n\n", 2)[1] if "\n\n" in text else "")
        first += bool(best) and (best[:60] in opening)
    n = max(1, len(answered))
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "right": round(sum(r["verdict"] == "right" for r in answerable) / max(1, len(answerable)), 4),
        "refused_unanswerable": round(
            sum(r["verdict"] == "refused" for r in rows if not r["answerable"])
            / max(1, sum(not r["answerable"] for r in rows)),
            4,
        )
        if any(not r["answerable"] for r in rows)
        else None,
        "answered": len(answered),
        "opens_with_best": round(first / n, 4),
        "marks_median": statistics.median(marks) if marks else None,
        "marks_per_source_mean": round(statistics.mean(per_source), 2) if per_source else None,
        "ends_on_colon": round(colon / n, 4),
        "chars_median": statistics.median(chars) if chars else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="runs of the commit before (bench/baselines.sh)")
    parser.add_argument("--before-label", default=None, help="what the before runs are (default: the folder's name)")
    parser.add_argument("--after", type=Path, default=AFTER)
    parser.add_argument("--rerun", action="store_true", help="ask every set again with this checkout into --after")
    parser.add_argument("--set", nargs="+", default=SETS, choices=SETS)
    args = parser.parse_args()
    if args.rerun:
        for name in args.set:
            quote_data.run(name, runs=args.after)
    report: dict[str, dict] = {}
    for name in args.set:
        spec = quote_data.SETS[name]
        before, after = args.before / f"{name}.jsonl", args.after / f"{name}.jsonl"
        if not before.is_file() or not after.is_file():
            print(f"{name}: no run in {before if not before.is_file() else after}; skipped")
            continue
        old, new = quote_data._jsonl(before), quote_data._jsonl(after)
        status = {r["id"]: r["status"] for r in old}
        report[name] = {
            "role": spec.role,
            "distribution": spec.distribution,
            "before": shape(old),
            "after": shape(new),
            # the share of questions answered-or-refused alike: 1.0 unless the decision itself changed between runs
            "same_decisions": round(sum(status.get(r["id"]) == r["status"] for r in new) / max(1, len(new)), 4),
        }
        b, a = report[name]["before"], report[name]["after"]
        print(
            f"{name} ({spec.role}): right {b['right']:.1%} → {a['right']:.1%}; opens with best "
            f"{b['opens_with_best']:.0%} → {a['opens_with_best']:.0%}; marks/source "
            f"{b['marks_per_source_mean']} → {a['marks_per_source_mean']}; ends on ':' {b['ends_on_colon']:.0%} → "
            f"{a['ends_on_colon']:.0%}"
        )
    label = args.before_label or args.before.parent.name.removeprefix("quote_")
    path = write_result("compose", {"before": label, "sets": report})
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
