"""The shipped reader: it loads with ONNX Runtime alone, matches its manifest, and scores as it did when it was made.

The golden scores below were read off the committed model (`reader.onnx`, whose sha256 the manifest records); a
retrained or re-exported model must update them in the same commit, like the manifest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from citewise.errors import ConfigError
from citewise.quote.reader import MANIFEST_FILE, MODEL_DIR, MODEL_FILE, Encoder, Reader
from citewise.text import answer_units

GOLDEN = json.loads((MODEL_DIR / "golden.json").read_text())  # written with the model by reader/train.py
PASSAGE, HEADING = GOLDEN["passage"], GOLDEN["heading"]


@pytest.fixture(scope="module")
def reader() -> Reader:
    return Reader()


def test_the_model_file_is_the_one_its_manifest_describes():
    manifest = json.loads((MODEL_DIR / MANIFEST_FILE).read_text())
    assert hashlib.sha256((MODEL_DIR / MODEL_FILE).read_bytes()).hexdigest() == manifest["onnx_sha256"]
    assert manifest["base_model"]["licence"] == "Apache-2.0"
    assert any("CC BY-SA 4.0" in i["licence"] for i in manifest["data"]["inputs"])  # SQuAD, attributed
    assert manifest["learning_curve"] and manifest["dev_int8"]


def test_golden_scores(reader):
    units = answer_units(PASSAGE)
    for case in GOLDEN["cases"]:
        scores = reader.score(case["question"], [(HEADING, PASSAGE, units)])[0]
        assert [round(s, 2) for s in scores.units] == pytest.approx(case["scores"], abs=0.05)
        best = max(range(len(units)), key=lambda i: scores.units[i])
        assert best == case["best"]


def test_it_scores_the_units_that_answer_above_those_that_do_not(reader):
    units = answer_units(PASSAGE)
    texts = [PASSAGE[a:b] for a, b, _ in units]

    def ranked(question: str) -> list[str]:
        scores = reader.score(question, [(HEADING, PASSAGE, units)])[0].units
        return [texts[i] for i in sorted(range(len(units)), key=lambda i: -scores[i])]

    assert "orbitron.toml" in ranked("Where does the daemon read its settings from?")[0]
    # The reader alone puts "It listens on port 7433" second, behind the page's opening sentence; the answerer's
    # ranker (tests/quote/test_answerer.py) chooses it. Above the sentence on changing the port and the code, though.
    port = ranked("What port does the daemon listen on by default?")
    assert any("7433" in t for t in port[:2]) and "7433" not in port[-1]


def test_the_same_input_gives_the_same_scores(reader):
    units = answer_units(PASSAGE)
    first = reader.score("What port does the daemon listen on?", [(HEADING, PASSAGE, units)] * 3)
    again = Reader().score("What port does the daemon listen on?", [(HEADING, PASSAGE, units)] * 3)
    assert first == again and first[0] == first[1] == first[2]


def test_a_kept_optimised_graph_scores_exactly_as_a_fresh_session(reader, tmp_path):
    """With the machine's models cache, the first reader keeps ORT's optimised graph there and the next process's
    reader loads it, optimising nothing: the same scores to the bit as a session optimised in memory."""
    units = answer_units(PASSAGE)
    question, passages = "What port does the daemon listen on?", [(HEADING, PASSAGE, units)] * 2
    fresh = reader.score(question, passages)
    first = Reader(keep=tmp_path).score(question, passages)
    (kept,) = tmp_path.glob("reader-*/reader.ort-*/model.onnx")
    made = kept.stat().st_mtime_ns
    assert Reader(keep=tmp_path).score(question, passages) == first == fresh
    assert kept.stat().st_mtime_ns == made


def test_a_long_passage_is_read_in_windows_cut_between_units():
    encoder = Encoder(MODEL_DIR / "tokenizer.json", max_tokens=64)
    text = " ".join(f"Sentence {i} says one more thing about the daemon and its port." for i in range(30))
    units = answer_units(text)
    windows = encoder.windows("What port?", "Guide", text, units)
    assert len(windows) > 3 and all(len(w.ids) <= 64 for w in windows)
    scored = [u for w in windows for u, _, _ in w.units]
    assert scored == list(range(len(units)))  # every unit scored once, in the window it starts in


def test_reading_loads_no_torch():
    """Quote mode runs on ONNX Runtime and the tokenizer alone."""
    code = (
        "import sys\n"
        "from citewise.quote.reader import Reader\n"
        "from citewise.text import answer_units\n"
        "t = 'It listens on port 7433.'\n"
        "Reader().score('Which port?', [('Guide', t, answer_units(t))])\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("damage", ["no model", "no manifest", "broken manifest", "no tokenizer", "garbage model"])
def test_a_damaged_model_folder_says_to_reinstall(tmp_path, damage):
    """Every way the shipped files can be missing or broken is one clear ConfigError, never a library's traceback."""
    for name in (MODEL_FILE, MANIFEST_FILE, "tokenizer.json"):
        (tmp_path / name).write_bytes((MODEL_DIR / name).read_bytes())
    if damage == "no model":
        (tmp_path / MODEL_FILE).unlink()
    elif damage == "no manifest":
        (tmp_path / MANIFEST_FILE).unlink()
    elif damage == "broken manifest":
        (tmp_path / MANIFEST_FILE).write_text("{not json")
    elif damage == "no tokenizer":
        (tmp_path / "tokenizer.json").unlink()
    else:  # a file that is not the model its manifest describes, even when the manifest lost its hash
        (tmp_path / MODEL_FILE).write_bytes(b"not an onnx model")
        manifest = json.loads((tmp_path / MANIFEST_FILE).read_text())
        manifest.pop("onnx_sha256")
        (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"[Rr]einstall"):
        Reader(tmp_path).score("Which port?", [("Guide", "Port 7433.", answer_units("Port 7433."))])
