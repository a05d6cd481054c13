"""ONNX Runtime sessions for the models Citewise runs (the embedder, quote mode's reader), started from a graph kept
optimised in the machine's models cache.

ORT optimises a graph (fuses attention, GELU, layer norms) every time a session is created, and copies the weights out
of the ONNX protobuf: together about half of a cold query's session, and most of the reader's load. The first session
on a model keeps the optimised graph, its weights in a file of their own that later sessions map instead of copying,
and later sessions load that with optimisation off: the same graph, so the same outputs to the bit
(tests/index/test_embeddings.py, tests/quote/test_reader.py). Only ORT's hardware-independent ("extended") level is
kept, named by the ORT version and the model file's path, size and time, so an upgrade, a reinstall or a re-export
makes a new one. `keep` is a folder of the machine's models cache (`Settings.model_cache_dir`), shared by every home;
when it cannot be written, or is None, sessions optimise in memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def session_options(ort, *, optimise: bool = True, threads: int | None = None):
    """Quiet options; with `threads`, that many intra-op threads run one operator at a time, whatever the machine."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not optimise:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def kept_session(ort, model: Path, keep: Path | None, *, stamp: str | None = None, threads: int | None = None):
    """A session on `model`, from its optimised graph kept in `keep` (made by this call when missing). `stamp` names
    the model's content (the shipped files pass their sha256): two installs of the same file share one kept graph.
    Without it, the file's size and time do."""
    providers = ["CPUExecutionProvider"]
    if keep is None:
        return ort.InferenceSession(str(model), session_options(ort, threads=threads), providers=providers)
    if stamp is None:
        stat = model.stat()
        stamp = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    kept = keep / f"{model.stem}.ort-{ort.__version__}-{stamp[:8]}"
    try:
        usable = (kept / "model.onnx").is_file()
    except OSError:  # another user's cache we may not read: optimise in memory
        usable = False
        keep = None
    if usable:
        try:
            return ort.InferenceSession(
                str(kept / "model.onnx"), session_options(ort, optimise=False, threads=threads), providers=providers
            )
        except Exception as exc:  # a damaged or unreadable copy: make it again
            log.warning("Optimising %s again: its kept copy did not load (%s)", model, exc)
            shutil.rmtree(kept, ignore_errors=True)
    try:
        if keep is None:
            raise OSError("the models cache is not readable")
        keep.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{kept.name}-", dir=keep))
    except OSError:  # a read-only cache
        return ort.InferenceSession(str(model), session_options(ort, threads=threads), providers=providers)
    options = session_options(ort, threads=threads)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(scratch / "model.onnx")
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "model.data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        session = ort.InferenceSession(str(model), options, providers=providers)
    except Exception:  # the copy could not be written (a full disk): optimise in memory
        shutil.rmtree(scratch, ignore_errors=True)
        return ort.InferenceSession(str(model), session_options(ort, threads=threads), providers=providers)
    try:
        scratch.chmod(0o755)  # mkdtemp makes it private; the cache is the machine's, other users read it too
        if kept.is_dir() and not (kept / "model.onnx").is_file():
            shutil.rmtree(kept, ignore_errors=True)  # a broken leftover would refuse every rename
        os.rename(scratch, kept)  # atomic: a reader sees the whole folder or none
    except OSError:  # another process kept its copy first
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        for stale in keep.glob(f"{model.stem}.ort-*"):  # other ORT versions, earlier exports
            if stale != kept:
                shutil.rmtree(stale, ignore_errors=True)
    return session
