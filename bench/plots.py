"""Bar charts of bench/results/peers.json: one PNG per figure, Citewise next to each peer.

    bench/.peers-venv/bin/python bench/plots.py [bench/results/peers.json] [bench/results]

Runs with the peers' venv (it has matplotlib; the product's venv does not need it). bench_peers.py calls it after
writing its results. The PNGs are git-ignored; BENCHMARKS.md links them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
LABELS = {"citewise": "Citewise", "langchain": "LangChain + Chroma", "llamaindex": "LlamaIndex"}
COLOURS = {"citewise": "#2b6cb0", "langchain": "#dd6b20", "llamaindex": "#718096"}

# file stem → (title, y label, how to read the figure out of one system's results, lower is better?)
FIGURES = {
    "peers_ingest": ("First ingest (Somnia docs)", "seconds", lambda r: r["first_ingest_s"], True),
    "peers_reingest": ("Unchanged re-ingest (Somnia docs)", "seconds", lambda r: r["reingest_s"], True),
    "peers_query_p50": ("Query latency p50 (top 5)", "ms", lambda r: r["query_latency"]["p50_ms"], True),
    "peers_query_p95": ("Query latency p95 (top 5)", "ms", lambda r: r["query_latency"]["p95_ms"], True),
    "peers_memory": ("Peak memory (RSS)", "MB", lambda r: r["peak_rss_mb"], True),
    "peers_ndcg_somnia": ("nDCG@10, Somnia FAQ set", "nDCG@10", lambda r: r["quality"]["somnia"]["ndcg@10"], False),
    "peers_ndcg_clapnq": ("nDCG@10, ClapNQ set", "nDCG@10", lambda r: r["quality"]["clapnq"]["ndcg@10"], False),
    "peers_recall_somnia": (
        "Recall@10, Somnia FAQ set",
        "Recall@10",
        lambda r: r["quality"]["somnia"]["recall@10"],
        False,
    ),
    "peers_recall_clapnq": ("Recall@10, ClapNQ set", "Recall@10", lambda r: r["quality"]["clapnq"]["recall@10"], False),
    "peers_hit_somnia": ("Hit rate@5, Somnia FAQ questions", "hit@5", lambda r: r["quality"]["somnia"]["hit@5"], False),
}


def plot(results: dict, out: Path) -> list[Path]:
    systems = results["systems"]
    written = []
    for stem, (title, unit, value, lower_better) in FIGURES.items():
        names = list(systems)
        values = [value(systems[n]) for n in names]
        fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=110)
        bars = ax.bar([LABELS.get(n, n) for n in names], values, color=[COLOURS.get(n, "#999") for n in names])
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], padding=2, fontsize=9)
        ax.set_title(f"{title} — {'lower' if lower_better else 'higher'} is better", fontsize=10)
        ax.set_ylabel(unit)
        ax.margins(y=0.15)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        path = out / f"{stem}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results" / "peers.json"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else source.parent
    for path in plot(json.loads(source.read_text()), out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
