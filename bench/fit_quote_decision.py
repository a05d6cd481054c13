"""Fit quote mode's answer-or-refuse model on the reader's evidence, judge it on held-out sets, and measure every rule
kept beside the reader.

    .venv/bin/python bench/fit_quote_decision.py [--rerun] [--no-write] [--no-ablation] [--baselines-only]

1. Runs quote mode on every question set of bench/quote_data.py with the decision switched off (threshold 0: every
   question the anchor guard lets through is answered), so each question's would-be answer and the features the
   decision sees are logged once (bench/data/quote/runs/). `--rerun` forces that; otherwise existing runs are used.
2. Fits a logistic regression (L2, on standardised features, Newton's method; numpy only) on the sets whose role is
   "fit", except those the reader was trained on (`TRAINED_ON`: its scores there are surer than anywhere else) —
   each set weighing the same and, inside a set, each class (answerable / unanswerable) weighing the same. One
   sample per part of a question.
3. Chooses the threshold on the fit sets only: the highest one that refuses at most DOCS_MAX_REFUSED of the
   answerable questions of the docs sets it was fitted on, taken together, each scored by the model fitted without
   it (out of fold).
4. Asks every set again with the model just fitted (bench/data/quote/live/): the figures reported, what a user gets.
   Judged sets (role "judge") are only ever scored here.
5. Ablation, on the fitted docs sets only (out of fold): each composition rule and the anchor guard switched off in
   a live run, and each decision feature left out of a refit — what each one is worth beside the reader.

Writes src/citewise/quote/decision.json (features, weights on raw features, intercept, threshold, what it was fitted
on, the reader's sha256) and bench/results/quote_decision.json (every figure, per set and distribution).
"""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np

import quote_data
from _common import ROOT, write_result
from citewise.quote import FEATURES, RULES
from citewise.quote.reader import MODEL_DIR, MODEL_FILE

DECISION = ROOT / "src" / "citewise" / "quote" / "decision.json"
CONFIGURATION = ROOT / "docs" / "configuration.md"
LIVE_RUNS = quote_data.DATA / "live"  # every set asked again with the model just fitted: the figures reported
ABLATION_RUNS = quote_data.DATA / "ablation"
# Earlier quote modes run on the same sets, for the "before" columns: CITEWISE_QUOTE_DATA=bench/data/quote_<name>
# PYTHONPATH=<a checkout of that commit>/src .venv/bin/python bench/quote_data.py (bench/baselines.sh).
BASELINES = {"2892aed": ROOT / "bench" / "data" / "quote_2892aed" / "runs",
             "acda5f9": ROOT / "bench" / "data" / "quote_acda5f9" / "runs"}  # fmt: skip
MANIFEST = ROOT / "bench" / "quote_sets.json"
# Sets whose questions and passages the reader was trained on (reader/data.py): not fitted on, reported apart.
TRAINED_ON = frozenset({"clapnq"})
L2 = 1.0
DOCS_MAX_REFUSED = 0.06
RELATIVE_CUT = 2.0
MIN_UNIT_SCORE = 0.0


def load(names: list[str]) -> dict[str, list[dict]]:
    return {n: quote_data._jsonl(quote_data.RUNS / f"{n}.jsonl") for n in names}


def reaches_model(part: dict) -> bool:
    """Whether the fitted model decides this part: it has features, and the anchor guard did not refuse it."""
    return part.get("features") is not None and not part.get("missing_anchors") and bool(part.get("read"))


def vector(part: dict, features: tuple[str, ...]) -> np.ndarray:
    return np.array([part["features"][name] for name in features], dtype=float)


def samples(rows: list[dict], features: tuple[str, ...]) -> list[tuple[np.ndarray, int]]:
    return [
        (vector(part, features), int(row["answerable"])) for row in rows for part in row["parts"] if reaches_model(part)
    ]


def fit(data: dict[str, list[dict]], features: tuple[str, ...] = FEATURES) -> tuple[np.ndarray, float]:
    xs, ys, ws = [], [], []
    for rows in data.values():
        items = samples(rows, features)
        if not items:
            continue
        counts = {label: sum(1 for _, y in items if y == label) for label in (0, 1)}
        classes = sum(1 for c in counts.values() if c)
        for x, y in items:
            xs.append(x)
            ys.append(y)
            ws.append(1.0 / (classes * counts[y]))
    return logistic(np.vstack(xs), np.array(ys, dtype=float), np.array(ws))


def logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Weighted, L2-penalised logistic regression by Newton's method on standardised columns; the weights returned
    apply to the raw columns."""
    w = w / w.sum() * len(w)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / std])
    beta = np.zeros(z.shape[1])
    penalty = np.diag([0.0] + [l2] * (z.shape[1] - 1))
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ beta, -60, 60)))
        gradient = z.T @ (w * (p - y)) + penalty @ beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta[1:] / std, float(beta[0] - (beta[1:] * mean / std).sum())


def probability(part: dict, weights: np.ndarray, intercept: float, features: tuple[str, ...] = FEATURES) -> float:
    return float(1 / (1 + np.exp(-np.clip(vector(part, features) @ weights + intercept, -60, 60))))


def outcome(row: dict, weights, intercept: float, threshold: float, features: tuple[str, ...] = FEATURES) -> str:
    """The verdict the run would get with this model: a question is answered when any part is."""
    answered = any(reaches_model(p) and probability(p, weights, intercept, features) >= threshold for p in row["parts"])
    if not row["answerable"]:
        return "answered" if answered else "refused"
    if not answered:
        return "refused"
    return row["verdict"] if row["verdict"] in ("right", "wrong") else "wrong"


def tally(verdicts: list[tuple[bool, str]]) -> dict:
    """Right / wrong / refused shares of (answerable, verdict) pairs, and refusal as a classifier of the
    unanswerable questions (the positive class)."""
    ans = [v for a, v in verdicts if a]
    una = [v for a, v in verdicts if not a]
    out: dict = {"questions": len(verdicts), "answerable": len(ans), "unanswerable": len(una)}
    if ans:
        out["right"] = round(ans.count("right") / len(ans), 4)
        out["wrong"] = round(ans.count("wrong") / len(ans), 4)
        out["refused_answerable"] = round(ans.count("refused") / len(ans), 4)
    if una:
        out["refused_unanswerable"] = round(una.count("refused") / len(una), 4)
    if ans and una:
        tp, fp, fn = una.count("refused"), ans.count("refused"), una.count("answered")
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        out["refusal_f1"] = round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0
        out["refusal_precision"] = round(precision, 4)
        out["refusal_recall"] = round(recall, 4)
    return out


def top1(rows: list[dict]) -> float | None:
    """The share of answerable questions whose best-scored unit holds an expected answer (single-part questions
    with a gold string; what the reader chose, decided or not)."""
    hits = total = 0
    for row in rows:
        gold = row.get("gold")
        if row.get("distribution") != "docs":  # SQuAD-style and ClapNQ rows log their passage's id as gold
            continue
        if not row["answerable"] or len(row["parts"]) != 1 or not gold or not isinstance(gold[0], str):
            continue
        total += 1
        best = quote_data._norm(row["parts"][0].get("best") or "")
        hits += any(quote_data._norm(g) in best for g in gold if g)
    return round(hits / total, 4) if total else None


def figures(rows, weights, intercept: float, threshold: float, features: tuple[str, ...] = FEATURES) -> dict:
    """The figures a model would give, decided offline on the threshold-0 runs."""
    return tally([(row["answerable"], outcome(row, weights, intercept, threshold, features)) for row in rows])


def as_run(rows: list[dict]) -> dict:
    """The figures of a run as it was decided when it ran (its logged verdicts): the live run, the baselines'."""
    out = tally([(r["answerable"], r["verdict"]) for r in rows])
    latencies = sorted(r["latency_ms"] for r in rows)
    out["latency_p50_ms"] = latencies[len(latencies) // 2]
    out["latency_p95_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    return out


def choose_threshold(data: dict[str, list[dict]], features: tuple[str, ...] = FEATURES) -> float:
    """The highest threshold that refuses at most DOCS_MAX_REFUSED of the docs sets' answerable questions, taken
    together, each docs set scored by the model fitted without it (out of fold): correctness first, within the
    refusal budget. Raising the threshold only adds refusals."""
    docs_sets = [name for name in data if quote_data.SETS[name].distribution == "docs"]
    without = {name: fit({n: rows for n, rows in data.items() if n != name}, features) for name in docs_sets}
    chosen = 0.05
    for threshold in np.round(np.arange(0.05, 0.96, 0.01), 2):
        figs = [figures(data[name], *without[name], threshold, features) for name in docs_sets]
        asked = sum(f.get("answerable", 0) for f in figs)
        refused = sum(f.get("refused_answerable", 0) * f.get("answerable", 0) for f in figs)
        if asked and refused / asked > DOCS_MAX_REFUSED:
            break
        chosen = float(threshold)
    return chosen


def out_of_fold(data: dict[str, list[dict]], features: tuple[str, ...] = FEATURES) -> dict[str, dict]:
    """Each fitted set scored by the model and threshold fitted without it."""
    out = {}
    for held in data:
        others = {n: rows for n, rows in data.items() if n != held}
        w, b = fit(others, features)
        t = choose_threshold(others, features)
        out[held] = {"threshold": t, **figures(data[held], w, b, t, features)}
    return out


def ablation(data: dict[str, list[dict]], fitted: dict) -> dict:
    """What each rule kept beside the reader is worth, on the fitted docs sets (out of fold for the features).

    - a composition rule or the anchor guard: every fitted docs set asked again live with that rule off (and the
      decision as fitted), against the same with every rule on;
    - a decision feature: the model refitted without it, each fitted set scored out of fold."""
    docs = [n for n in data if quote_data.SETS[n].distribution == "docs"]
    result: dict = {"rules": {}, "features": {}}
    baseline = {n: as_run(quote_data._jsonl(LIVE_RUNS / f"{n}.jsonl")) for n in docs}
    result["rules"]["all"] = baseline
    for rule in RULES:
        kept = tuple(r for r in RULES if r != rule)
        runs = ABLATION_RUNS / f"without-{rule}"
        result["rules"][rule] = {
            n: as_run(quote_data._jsonl(quote_data.run(n, quote={**fitted, "rules": kept}, runs=runs))) for n in docs
        }
    full = out_of_fold(data)
    result["features"]["all"] = full
    for feature in FEATURES:
        kept = tuple(f for f in FEATURES if f != feature)
        result["features"][feature] = out_of_fold(data, kept)
    return result


def document(fitted: dict) -> None:
    """Rewrite the fitted rows of docs/configuration.md's quote table from decision.json (a test ties the page to
    Settings)."""
    rows = {
        "weights": (
            "CITEWISE_QUOTE__WEIGHTS",
            ", ".join(f"`{name}`: {value}" for name, value in fitted["weights"].items()),
            "feature → weight",
            "Weights of the answer-or-refuse model over the reader's evidence (each feature is described in "
            "[How quote mode decides](answers.md#how-quote-mode-decides)).",
        ),
        "intercept": ("CITEWISE_QUOTE__INTERCEPT", f"`{fitted['intercept']}`", "any number", "The model's intercept."),
        "threshold": (
            "CITEWISE_QUOTE__THRESHOLD",
            f"`{fitted['threshold']}`",
            "0–1",
            "Answer when the model's probability that the evidence answers the question reaches this; lower answers "
            "more, higher refuses more.",
        ),
        "relative_cut": (
            "CITEWISE_QUOTE__RELATIVE_CUT",
            f"`{fitted['relative_cut']}`",
            "≥ 0",
            "Quote, besides the best unit, the units the reader scores within this many log-odds of it.",
        ),
        "min_unit_score": (
            "CITEWISE_QUOTE__MIN_UNIT_SCORE",
            f"`{fitted['min_unit_score']}`",
            "any number",
            "A unit besides the best one is quoted only when the reader's log-odds that it answers reach this.",
        ),
    }
    ranker = fitted.get("ranker") or {"weights": {}, "intercept": 0.0}
    rows["ranker_weights"] = (
        "CITEWISE_QUOTE__RANKER_WEIGHTS",
        ", ".join(f"`{name}`: {value}" for name, value in ranker["weights"].items()) or "none",
        "feature → weight",
        "Weights of the unit ranker, which combines the reader's score with the evidence beside it (see "
        "[How quote mode decides](answers.md#how-quote-mode-decides)); empty: the reader's score alone.",
    )
    rows["ranker_intercept"] = (
        "CITEWISE_QUOTE__RANKER_INTERCEPT",
        f"`{ranker['intercept']}`",
        "any number",
        "The unit ranker's intercept.",
    )
    lines = CONFIGURATION.read_text().splitlines()
    stale = (
        "weights",
        "intercept",
        "threshold",
        "relative_cut",
        "min_unit_score",
        "ranker_weights",
        "ranker_intercept",
    )
    lines = [line for line in lines if not any(line.startswith(f"| `{name}` | `CITEWISE_QUOTE__") for name in stale)]
    anchor = next(i for i, line in enumerate(lines) if line.startswith("| `passages` | `CITEWISE_QUOTE__PASSAGES`"))
    new = [
        f"| `{name}` | `{env}` | {default} | {allowed} | {text} |"
        for name, (env, default, allowed, text) in rows.items()
    ]
    lines[anchor + 1 : anchor + 1] = new
    CONFIGURATION.write_text("\n".join(lines) + "\n")


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def add_baselines(report: dict | None = None) -> dict:
    """The "before" figures of every set an earlier commit's quote mode was run on (bench/baselines.sh), added to
    `report` (by default the last bench/results/quote_decision.json, written back, its top-1 read again from the
    threshold-0 runs)."""
    path = ROOT / "bench" / "results" / "quote_decision.json"
    last = report is None
    report = json.loads(path.read_text()) if last else report
    for name, figures in report["sets"].items():
        if last and (quote_data.RUNS / f"{name}.jsonl").exists():
            figures["top1"] = top1(quote_data._jsonl(quote_data.RUNS / f"{name}.jsonl"))
        for commit, folder in BASELINES.items():
            before = folder / f"{name}.jsonl"
            if before.exists():
                figures[f"before_{commit}"] = as_run(quote_data._jsonl(before))
    if last:
        write_result("quote_decision", report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerun", action="store_true", help="run quote mode on every set again")
    parser.add_argument("--no-write", action="store_true", help="report only; leave decision.json as it is")
    parser.add_argument("--no-ablation", action="store_true", help="skip the ablation runs")
    parser.add_argument(
        "--baselines-only", action="store_true", help="add the earlier commits' runs to the last result; fit nothing"
    )
    args = parser.parse_args()
    if args.baselines_only:
        add_baselines()
        return
    names = list(quote_data.SETS)
    if args.rerun or any(not (quote_data.RUNS / f"{n}.jsonl").exists() for n in names):
        for name in names:
            quote_data.run(name, decide_all=True)
    quote_data.write_manifest()
    data = load(names)
    fit_names = [n for n in names if quote_data.SETS[n].role == "fit" and n not in TRAINED_ON]
    judge_names = [n for n in names if quote_data.SETS[n].role == "judge"]
    fit_data = {n: data[n] for n in fit_names}

    weights, intercept = fit(fit_data)
    threshold = choose_threshold(fit_data)
    fitted = {
        "weights": dict(zip(FEATURES, map(float, np.round(weights, 4)), strict=True)),
        "intercept": round(intercept, 4),
        "threshold": threshold,
        "relative_cut": RELATIVE_CUT,
        "min_unit_score": MIN_UNIT_SCORE,
    }
    report: dict = {
        "features": list(FEATURES),
        **fitted,
        "fitted_on": fit_names,
        "trained_on": sorted(TRAINED_ON),
        "judged_on": judge_names,
        "reader_sha256": digest(MODEL_DIR / MODEL_FILE),
        "sets": {},
    }
    for name in names:
        spec = quote_data.SETS[name]
        live = quote_data._jsonl(quote_data.run(name, quote=fitted, runs=LIVE_RUNS))
        role = "trained" if name in TRAINED_ON else spec.role
        report["sets"][name] = {
            "role": role,
            "distribution": spec.distribution,
            "description": spec.description,
            **as_run(live),
            "top1": top1(data[name]),
        }
    add_baselines(report)
    report["leave_one_out"] = out_of_fold(fit_data)
    if not args.no_ablation:
        report["ablation"] = ablation(fit_data, fitted)
    shown = ("right", "wrong", "refused_answerable", "refused_unanswerable", "refusal_f1", "top1", "latency_p50_ms")
    for name, fig in report["sets"].items():
        print(f"{name:20} {fig['role']:7} {json.dumps({k: v for k, v in fig.items() if k in shown})}")
    for name, fig in report["leave_one_out"].items():
        print(f"LOO {name:16} {json.dumps(fig)}")
    print("fitted", json.dumps(fitted))
    if not args.no_write:
        ranker = json.loads(DECISION.read_text()).get("ranker")  # bench/fit_quote_ranker.py's, kept
        DECISION.write_text(
            json.dumps(
                {
                    **({"ranker": ranker} if ranker else {}),
                    "features": list(FEATURES),
                    **fitted,
                    "fitted_on": fit_names,
                    "trained_on": sorted(TRAINED_ON),
                    "judged_on": judge_names,
                    "reader_sha256": report["reader_sha256"],
                    "manifest_sha256": digest(MANIFEST)[:16],
                    "script": "bench/fit_quote_decision.py",
                },
                indent=2,
            )
            + "\n"
        )
        write_result("quote_decision", report)
        document(json.loads(DECISION.read_text()))


if __name__ == "__main__":
    main()
