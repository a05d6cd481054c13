import citewise


def test_public_surface_is_small_and_deliberate():
    assert sorted(citewise.__all__) == [
        "Chunk",
        "DocStatus",
        "RetrievalMode",
        "ScoredChunk",
        "SearchResult",
        "Settings",
    ]
    for name in citewise.__all__:
        assert getattr(citewise, name) is not None
