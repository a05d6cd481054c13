"""Sessions of the shipped models from a graph kept optimised in the machine's models cache, which every install,
home and user of the machine shares."""

from __future__ import annotations

import os
import shutil
import stat

import numpy as np
import onnxruntime as ort

from citewise.index.embeddings import SHIPPED_DIR, ShippedModel
from citewise.onnx_sessions import kept_session


def _run(session) -> np.ndarray:
    ids = np.array([[101, 7592, 2088, 102]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})[0]


def test_two_installs_of_one_model_share_one_kept_graph_readable_by_all(tmp_path):
    """Two copies of the shipped file (two venvs, two clones) carry the same stamp: the second loads the graph the
    first kept instead of deleting it and keeping its own, and the kept folder is readable by other users."""
    shipped = ShippedModel.load(SHIPPED_DIR)
    first, second = tmp_path / "venv-a" / "embedder.onnx", tmp_path / "venv-b" / "embedder.onnx"
    for copy in (first, second):
        copy.parent.mkdir()
        shutil.copyfile(shipped.onnx, copy)
    os.utime(second, (1_000_000_000, 1_000_000_000))  # another install time
    keep = tmp_path / "cache"

    expected = _run(kept_session(ort, first, keep, stamp=shipped.sha256))
    (kept,) = keep.glob("embedder.ort-*")
    made = (kept / "model.onnx").stat().st_mtime_ns
    assert stat.S_IMODE(kept.stat().st_mode) == 0o755
    np.testing.assert_array_equal(_run(kept_session(ort, second, keep, stamp=shipped.sha256)), expected)
    assert list(keep.glob("embedder.ort-*")) == [kept] and (kept / "model.onnx").stat().st_mtime_ns == made


def test_a_broken_kept_folder_is_replaced_and_an_unwritable_cache_still_answers(tmp_path):
    shipped = ShippedModel.load(SHIPPED_DIR)
    keep = tmp_path / "cache"
    expected = _run(kept_session(ort, shipped.onnx, None))  # no cache: optimised in memory
    assert not keep.exists()
    session = kept_session(ort, shipped.onnx, keep, stamp=shipped.sha256)
    (kept,) = keep.glob("embedder.ort-*")
    (kept / "model.onnx").unlink()  # a leftover without its graph: replaced, not refused forever
    np.testing.assert_array_equal(_run(kept_session(ort, shipped.onnx, keep, stamp=shipped.sha256)), expected)
    assert (kept / "model.onnx").is_file()
    np.testing.assert_array_equal(_run(session), expected)

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    np.testing.assert_array_equal(_run(kept_session(ort, shipped.onnx, blocked / "models")), expected)
