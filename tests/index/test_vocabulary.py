"""The index vocabulary: built from the store per owner, saved with the version it was built from."""

from __future__ import annotations

from citewise.index.vocabulary import Vocabulary
from citewise.ingest.pipeline import Ingestor


def test_counts_are_per_owner_and_a_view_sees_public_plus_its_own():
    vocabulary = Vocabulary.build(
        [("public", "Ledger snapshots are nightly."), ("public", "The ledger token."), ("alice", "Salary bands")],
        version=3,
    )
    assert vocabulary.view(None).df("ledger") == 2 and vocabulary.view(None).chunks == 2
    assert vocabulary.view(None).df("salary") == 0
    assert vocabulary.view("alice").df("salary") == 1 and vocabulary.view("alice").chunks == 3


def test_correction_prefers_the_closest_then_the_most_frequent_word():
    view = Vocabulary.build([("public", "port port port post sort"), ("public", "port export")], version=1).view(None)
    assert view.correct("prot") == "port"  # a swap of two letters is one edit
    assert view.correct("port") is None  # known words are never changed
    assert view.correct("1234") is None and view.correct("zzzzzzzz") is None


def test_the_vocabulary_is_saved_and_rebuilt_when_the_store_moves_on(kb, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nThe zephyrion module rotates keys.\n")
    Ingestor(kb).ingest_paths([root])
    first = kb.vocabulary
    assert first.view(None).df("zephyrion") == 1
    assert (kb.dir / "vocabulary.json").exists()
    (root / "b.md").write_text("# Beta\n\nThe zephyrion module also signs.\n")
    Ingestor(kb).ingest_paths([root])
    assert kb.vocabulary.version != first.version
    assert kb.vocabulary.view(None).df("zephyrion") == 2


def test_a_typo_the_docs_hold_once_is_still_corrected_to_the_word_they_use_everywhere():
    rows = [("public", "Delete the document from the index.")] * 12 + [("public", "A typo example: delet the indx.")]
    view = Vocabulary.build(rows, version=1).view(None)
    assert view.correct("delet") == "delete" and view.correct("indx") == "index"
    assert view.correct("delete") is None
    # A rare word with no far more frequent neighbour is the docs' own word, not a typo.
    rare = Vocabulary.build([("public", "The zephyrion module."), ("public", "zephyrian lore")], version=1)
    assert rare.view(None).correct("zephyrion") is None


def test_an_english_word_the_docs_lack_is_no_typo():
    rows = [("public", "The chat window shows the page size, the server, the main loan terms and a mailbox.")] * 3
    view = Vocabulary.build(rows, version=1).view(None)
    # Each is one edit from a docs word starting with its letter, and means something else.
    for word in ("chart", "site", "sever", "mail", "loans"):
        assert view.correct(word) is None, word
    assert view.correct("chatt") == "chat" and view.correct("sise") == "size"  # typos
    rows = [("public", "Install the package.")] * 3
    assert Vocabulary.build(rows, version=1).view(None).correct("instal") == "install"  # the list's rarest don't count


def test_correction_works_without_the_word_list(monkeypatch):
    # A missing or broken word list must not fail a search: correction goes on as it did without it.
    import citewise.text as text

    def unreadable(package):
        raise ModuleNotFoundError(package)

    monkeypatch.setattr(text, "_ENGLISH", None)
    monkeypatch.setattr("importlib.resources.files", unreadable)
    view = Vocabulary.build([("public", "The site and the size.")] * 3, version=1).view(None)
    assert view.correct("sitte") == "site"
    assert view.correct("sise") in ("site", "size")
    assert text.english_count("site") == 0


def test_a_correction_starts_with_the_word_s_letter_and_prefers_the_word_a_typo_left_a_letter_out_of():
    rows = [("public", "The list of routes. A rate limit applies. Reloading the page.")] * 3
    view = Vocabulary.build(rows, version=1).view(None)
    assert view.correct("limt") == "limit"  # one edit from both "limit" and "list": a letter left out is commoner
    assert view.correct("preloading") is None  # a prefix makes another word, not a typo of "reloading"
    assert view.correct("xlist") is None
