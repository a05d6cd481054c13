"""Fit quote mode's answer-or-refuse model on some distributions and judge it on others.

    .venv/bin/python bench/fit_quote_decision.py [--rerun] [--no-write]

1. Runs quote mode on every question set of bench/quote_data.py with the decision switched off (threshold 0: every
   question the anchor rule lets through is answered), so each question's would-be answer and the signals the
   decision sees are logged once (bench/data/quote/runs/). `--rerun` forces that; otherwise existing runs are used.
2. Fits a logistic regression (L2, on standardised signals, Newton's method; numpy only) on the sets whose role is
   "fit" — Citewise's own docs, the test fixtures' docs, ClapNQ, the Somnia FAQ — each set weighing the same and,
   inside a set, each class (answerable / unanswerable) weighing the same, so no set's size or class balance
   decides the model. One sample per part of a question.
3. Chooses the threshold on the fit sets only: the highest one that refuses at most 10% of the answerable
   questions of the docs sets it was fitted on, taken together, each scored by the model fitted without it (out
   of fold: refuse as much as that budget allows on docs the model has not seen).
4. Judges it on the held-out sets (role "judge": questions written from the Somnia docs, the same questions after
   their answering pages were removed, SQuAD-style adversarial questions) it never saw, and reports leave-one-set-out
   figures for every fit set too (fitted and thresholded without that set).

The figures reported per set are those of quote mode run again on every set with the model just fitted
(bench/data/quote/live/), what a user gets: there a multi-part question with a refused part answers without that
part's quotes. The leave-one-set-out figures are decided offline on the threshold-0 runs, where such a question
keeps its threshold-0 verdict (a handful of questions; 3 of 1,858 on 2026-11-27). After any change to quote mode run
with `--rerun`: without it the fit reads logged runs that may predate the code, while the table always comes from the
code as it is.

Writes src/citewise/quote/decision.json (weights on raw signals, intercept, threshold, what it was fitted on, the
data manifest's digest) and bench/results/quote_decision.json (every figure, per set and distribution).
"""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np

import quote_data
from _common import ROOT, write_result
from citewise.quote import FEATURES

DECISION = ROOT / "src" / "citewise" / "quote" / "decision.json"
CONFIGURATION = ROOT / "docs" / "configuration.md"
# Quote mode as it was before the decision model (the cosine gate, commit 2892aed), run on the same sets with
# CITEWISE_QUOTE_DATA=bench/data/quote_baseline PYTHONPATH=<a checkout of 2892aed>/src bench/quote_data.py.
LIVE_RUNS = quote_data.DATA / "live"  # every set asked again with the model just fitted: the figures reported
BASELINE = ROOT / "bench" / "data" / "quote_baseline" / "runs"
BASELINE_COMMIT = "2892aed"
MANIFEST = ROOT / "bench" / "quote_sets.json"
L2 = 1.0
DOCS_MAX_REFUSED = 0.10


def load(names: list[str]) -> dict[str, list[dict]]:
    return {n: quote_data._jsonl(quote_data.RUNS / f"{n}.jsonl") for n in names}


def reaches_model(part: dict) -> bool:
    """Whether the fitted model decides this part: it has signals, and no rule refused it first (an anchor the
    passages lack, a time or number a "how long/often/many" question asks and no quote states)."""
    return part.get("signals") is not None and not part.get("missing_anchors") and not part.get("missing_value")


def samples(rows: list[dict]) -> list[tuple[np.ndarray, int, dict]]:
    """(features, label, row) per part that reached the decision (a part refused earlier is refused anyway)."""
    out = []
    for row in rows:
        for part in row["parts"]:
            if not reaches_model(part):
                continue
            x = np.array([part["signals"][name] for name in FEATURES], dtype=float)
            out.append((x, int(row["answerable"]), row))
    return out


def fit(data: dict[str, list[dict]]) -> tuple[np.ndarray, float]:
    xs, ys, ws = [], [], []
    for rows in data.values():
        items = samples(rows)
        if not items:
            continue
        counts = {label: sum(1 for _, y, _ in items if y == label) for label in (0, 1)}
        classes = sum(1 for c in counts.values() if c)
        for x, y, _ in items:
            xs.append(x)
            ys.append(y)
            ws.append(1.0 / (classes * counts[y]))
    return logistic(np.vstack(xs), np.array(ys, dtype=float), np.array(ws))


def logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Weighted, L2-penalised logistic regression by Newton's method on standardised columns; the weights returned
    apply to the raw columns. The one fit of both quote models (this decision and bench/fit_quote_ranker.py's)."""
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
    weights = beta[1:] / std
    intercept = float(beta[0] - (beta[1:] * mean / std).sum())
    return weights, intercept


def probability(part: dict, weights: np.ndarray, intercept: float) -> float:
    x = np.array([part["signals"][name] for name in FEATURES], dtype=float)
    return float(1 / (1 + np.exp(-np.clip(x @ weights + intercept, -60, 60))))


def outcome(row: dict, weights: np.ndarray, intercept: float, threshold: float) -> str:
    """The verdict the run would get with this model: a question is answered when any part is."""
    answered = any(reaches_model(p) and probability(p, weights, intercept) >= threshold for p in row["parts"])
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
        tp = una.count("refused")
        fp = ans.count("refused")
        fn = una.count("answered")
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        out["refusal_f1"] = round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0
        out["refusal_precision"] = round(precision, 4)
        out["refusal_recall"] = round(recall, 4)
    return out


def figures(rows: list[dict], weights: np.ndarray, intercept: float, threshold: float) -> dict:
    """The figures a model would give, decided offline on the threshold-0 runs. A multi-part question counts as
    its threshold-0 verdict when any part is answered, though live a refused part's quotes are left out: what the
    threshold and the out-of-fold figures need, not what a user sees (`as_run` of a live run)."""
    return tally([(row["answerable"], outcome(row, weights, intercept, threshold)) for row in rows])


def as_run(rows: list[dict]) -> dict:
    """The figures of a run as it was decided when it ran (its logged verdicts): the live run, the baseline's."""
    out = tally([(r["answerable"], r["verdict"]) for r in rows])
    latencies = sorted(r["latency_ms"] for r in rows)
    out["latency_p50_ms"] = latencies[len(latencies) // 2]
    out["latency_p95_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    return out


def choose_threshold(data: dict[str, list[dict]]) -> float:
    """The highest threshold that refuses at most DOCS_MAX_REFUSED of the docs sets' answerable questions, taken
    together, each docs set scored by the model fitted without it (out of fold): correctness first, within the
    refusal budget. Raising the threshold only adds refusals.

    In-sample probabilities are surer of a set's answerable questions than a model will be of another product's:
    a threshold chosen on them (0.31) refused 9.7% of the fitted docs sets' answerable questions together and 15%
    and 19% of pip_docs' and somnia_b's (2026-11-26). Chosen out of fold (0.25), the budget is spent as it will be
    on docs nobody fitted on: 9% and 16%."""
    docs_sets = [name for name in data if quote_data.SETS[name].distribution == "docs"]
    without = {name: fit({n: rows for n, rows in data.items() if n != name}) for name in docs_sets}
    chosen = 0.05
    for threshold in np.round(np.arange(0.05, 0.96, 0.01), 2):
        figs = [figures(data[name], *without[name], threshold) for name in docs_sets]
        docs = [f for f in figs if f.get("answerable")]
        asked = sum(f["answerable"] for f in docs)
        refused = sum(f["refused_answerable"] * f["answerable"] for f in docs)
        if asked and refused / asked > DOCS_MAX_REFUSED:
            break
        chosen = float(threshold)
    return chosen


def document() -> None:
    """Rewrite the fitted rows of docs/configuration.md's quote table from decision.json (a test ties the page to
    Settings): the decision's weights, intercept and threshold, the sentence ranker's weights and intercept."""
    fitted = json.loads(DECISION.read_text())
    ranker = fitted.get("ranker") or {"weights": {}, "intercept": 0.0}
    rows = {
        "weights": (
            "CITEWISE_QUOTE__WEIGHTS",
            ", ".join(f"`{name}`: {value}" for name, value in fitted["weights"].items()),
            "feature → weight",
            "Weights of the answer-or-refuse model's signals (each is described in "
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
        "ranker_weights": (
            "CITEWISE_QUOTE__RANKER_WEIGHTS",
            ", ".join(f"`{name}`: {value}" for name, value in ranker["weights"].items()) or "none",
            "feature → weight",
            "Weights of the sentence ranker's features, which choose the sentences an answer quotes (see "
            "[How quote mode decides](answers.md#how-quote-mode-decides)); empty: the hand-weighed relevance alone.",
        ),
        "ranker_intercept": (
            "CITEWISE_QUOTE__RANKER_INTERCEPT",
            f"`{ranker['intercept']}`",
            "any number",
            "The sentence ranker's intercept.",
        ),
    }
    lines = CONFIGURATION.read_text().splitlines()
    lines = [
        line for line in lines if not any(line.startswith(f"| `{name}` | `{env}`") for name, (env, *_) in rows.items())
    ]
    anchor = next(i for i, line in enumerate(lines) if line.startswith("| `passages` | `CITEWISE_QUOTE__PASSAGES`"))
    new = [
        f"| `{name}` | `{env}` | {default} | {allowed} | {text} |"
        for name, (env, default, allowed, text) in rows.items()
    ]
    lines[anchor + 1 : anchor + 1] = new
    CONFIGURATION.write_text("\n".join(lines) + "\n")


def manifest_digest() -> str:
    return hashlib.sha256(MANIFEST.read_bytes()).hexdigest()[:16] if MANIFEST.exists() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerun", action="store_true", help="run quote mode on every set again")
    parser.add_argument("--no-write", action="store_true", help="report only; leave decision.json as it is")
    args = parser.parse_args()
    names = list(quote_data.SETS)
    if args.rerun or any(not (quote_data.RUNS / f"{n}.jsonl").exists() for n in names):
        for name in names:
            quote_data.run(name, decide_all=True)
    quote_data.write_manifest()
    data = load(names)
    fit_names = [n for n in names if quote_data.SETS[n].role == "fit"]
    judge_names = [n for n in names if quote_data.SETS[n].role == "judge"]

    weights, intercept = fit({n: data[n] for n in fit_names})
    threshold = choose_threshold({n: data[n] for n in fit_names})
    report: dict = {
        "features": list(FEATURES),
        "weights": dict(zip(FEATURES, map(float, np.round(weights, 4)), strict=True)),
        "intercept": round(intercept, 4),
        "threshold": threshold,
        "fitted_on": fit_names,
        "judged_on": judge_names,
        "sets": {},
        "leave_one_out": {},
    }
    fitted = {"weights": report["weights"], "intercept": report["intercept"], "threshold": threshold}
    for name in names:
        spec = quote_data.SETS[name]
        # What a user gets: every question asked again with the model just fitted, a refused part's quotes left out
        live = quote_data._jsonl(quote_data.run(name, quote=fitted, runs=LIVE_RUNS))
        report["sets"][name] = {
            "role": spec.role,
            "distribution": spec.distribution,
            "description": spec.description,
            **as_run(live),
        }
        before = BASELINE / f"{name}.jsonl"
        if before.exists():
            report["sets"][name]["before"] = as_run(quote_data._jsonl(before))
    report["before_commit"] = BASELINE_COMMIT
    for held in fit_names:
        others = {n: data[n] for n in fit_names if n != held}
        w, b = fit(others)
        t = choose_threshold(others)
        report["leave_one_out"][held] = {"threshold": t, **figures(data[held], w, b, t)}

    for name, fig in report["sets"].items():
        print(f"{name:18} {fig['role']:5} {json.dumps({k: v for k, v in fig.items() if k not in ('role',)})}")
    for name, fig in report["leave_one_out"].items():
        print(f"LOO {name:14} {json.dumps(fig)}")
    print("weights", report["weights"], "intercept", report["intercept"], "threshold", threshold)
    if not args.no_write:
        ranker = json.loads(DECISION.read_text()).get("ranker")
        DECISION.write_text(
            json.dumps(
                {
                    **({"ranker": ranker} if ranker else {}),
                    "weights": report["weights"],
                    "intercept": report["intercept"],
                    "threshold": threshold,
                    "fitted_on": fit_names,
                    "judged_on": judge_names,
                    "manifest_sha256": manifest_digest(),
                    "script": "bench/fit_quote_decision.py",
                },
                indent=2,
            )
            + "\n"
        )
        write_result("quote_decision", report)
        document()


if __name__ == "__main__":
    main()
