"""How quote mode's answers read, before and after a change to their composition (issue 33: answer first).

    .venv/bin/python bench/bench_compose.py --compose-of bd7c8c2 [--rerun]

Composition changes which units an answer quotes, in what order and with which marks; it never changes whether a
question is answered (the decision reads the reader's scores, not the text). So the question sets are asked twice
with this checkout's reader, ranker and decision: once with the composition (`citewise/quote/compose.py`) of an
earlier commit (`--compose-of`: this checkout's source with that one file taken from the commit, in a scratch
folder), once as they are (`--rerun`, or the runs already in `--after`). Per set: right answers, whether the
decision came out alike, and the answers' shape — whether the answer opens with the unit the reader ranked best,
citation marks per source, answers ending on a colon, length. Judged sets are only scored here, never read to tune.

Writes bench/results/compose.json; bench/report.py puts it in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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


def ask_with_composition_of(commit: str, names: list[str]) -> Path:
    """Every set asked with this checkout, its compose.py taken from `commit`; returns the runs' folder."""
    runs = quote_data.DATA / f"compose_of_{commit}"
    code = subprocess.run(
        ["git", "show", f"{commit}:src/citewise/quote/compose.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    with tempfile.TemporaryDirectory() as scratch:
        src = Path(scratch) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        (src / "citewise" / "quote" / "compose.py").write_text(code, encoding="utf-8")
        script = "import sys; import quote_data; from pathlib import Path\n"
        script += "for n in sys.argv[2:]: quote_data.run(n, runs=Path(sys.argv[1]))"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "bench")])}
        subprocess.run([sys.executable, "-c", script, str(runs), *names], cwd=ROOT / "bench", env=env, check=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compose-of", help="ask the sets with this commit's composition first (the before runs)")
    parser.add_argument("--before", type=Path, help="runs to compare with instead (default: those --compose-of makes)")
    parser.add_argument("--before-label", default=None, help="what the before runs are")
    parser.add_argument("--after", type=Path, default=AFTER)
    parser.add_argument("--rerun", action="store_true", help="ask every set again with this checkout into --after")
    parser.add_argument("--set", nargs="+", default=SETS, choices=SETS)
    args = parser.parse_args()
    if args.compose_of and args.before is None:
        args.before = ask_with_composition_of(args.compose_of, args.set)
        args.before_label = args.before_label or args.compose_of
    if args.before is None:
        parser.error("give --compose-of COMMIT or --before DIR")
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
    label = args.before_label or args.compose_of or args.before.parent.name.removeprefix("quote_")
    same_reader = bool(args.compose_of) and args.before.name == f"compose_of_{args.compose_of}"
    path = write_result("compose", {"before": label, "same_reader": same_reader, "sets": report})
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
