"""Documents over HTTP: upload → ingest as the caller's owner, list, delete, open a chunk; and the 4xx cases."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import BROKEN
from tests.server.conftest import auth

from citewise.types import PUBLIC_OWNER

NOTE = b"# Launch codes\n\nThe staging launch code for Orbitron is zebra-4471. Rotate it every quarter.\n"


def test_upload_ingests_under_the_callers_owner_and_lists_it(server_settings, make_client):
    client = make_client(server_settings)
    response = client.post("/api/documents", files=[("files", ("launch notes.md", NOTE, "text/markdown"))])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["indexed"] == 1 and body["failed"] == 0
    [doc] = body["documents"]
    assert doc["filename"] == "launch notes.md"
    assert doc["status"] == "INDEXED" and doc["chunk_count"] >= 1
    assert doc["owner"] == PUBLIC_OWNER  # no keys: the local single user is the public owner
    assert "path" not in doc and "source" not in doc  # the server's file layout is not the client's business
    stored = server_settings.home / "uploads" / PUBLIC_OWNER / "launch notes.md"
    assert stored.read_bytes() == NOTE

    listed = client.get("/api/documents").json()
    assert [d["doc_id"] for d in listed] == [doc["doc_id"]]

    # Uploading the same file again changes nothing; a new version replaces the old one under the same id.
    again = client.post("/api/documents", files=[("files", ("launch notes.md", NOTE, "text/markdown"))]).json()
    assert again["unchanged"] == 1 and again["documents"][0]["doc_id"] == doc["doc_id"]
    newer = client.post(
        "/api/documents", files=[("files", ("launch notes.md", NOTE + b"\nSecond paragraph.\n", "text/markdown"))]
    ).json()
    assert newer["indexed"] == 1 and newer["documents"][0]["doc_id"] == doc["doc_id"]


def test_a_broken_file_fails_alone(server_settings, make_client):
    client = make_client(server_settings)
    files = [
        ("files", ("good.md", NOTE, "text/markdown")),
        ("files", ("broken.pdf", (BROKEN / "broken.pdf").read_bytes(), "application/pdf")),
    ]
    response = client.post("/api/documents", files=files)
    assert response.status_code == 200
    statuses = {d["filename"]: d for d in response.json()["documents"]}
    assert statuses["good.md"]["status"] == "INDEXED"
    assert statuses["broken.pdf"]["status"] == "FAILED" and statuses["broken.pdf"]["error"]
    assert response.json()["failed"] == 1
    failed = client.get("/api/documents", params={"status": "FAILED"}).json()
    assert [d["filename"] for d in failed] == ["broken.pdf"]


def test_path_traversal_is_refused_and_nothing_is_written(server_settings, make_client, tmp_path: Path):
    client = make_client(server_settings)
    for name in ["../escape.md", "..\\escape.md", "/etc/escape.md", "sub/dir.md", "..", ".md"]:
        response = client.post("/api/documents", files=[("files", (name, NOTE, "text/markdown"))])
        assert response.status_code == 400, (name, response.status_code, response.text)
        assert "detail" in response.json()
    assert not (server_settings.home / "escape.md").exists()
    assert not list(tmp_path.rglob("escape.md"))
    assert client.get("/api/documents").json() == []


def test_unsafe_characters_are_replaced_not_trusted(server_settings, make_client):
    client = make_client(server_settings)
    response = client.post("/api/documents", files=[("files", ("notes;rm -rf $HOME.md", NOTE, "text/markdown"))])
    assert response.status_code == 200
    # Characters outside letters, digits, '.', '_', ' ' and '-' are stored as %XX: never trusted, never merged.
    assert response.json()["documents"][0]["filename"] == "notes%3Brm -rf %24HOME.md"


def test_look_alike_names_stay_distinct_documents(server_settings, make_client):
    """'evil∕slash.md' (U+2215) and 'evil／slash.md' (U+FF0F) were both stored as 'evil_slash.md': the second upload
    replaced the first document. Distinct names are distinct files and documents; plain names keep their name."""
    client = make_client(server_settings)
    names = ["evil\u2215slash.md", "evil\uff0fslash.md", "evil_slash.md", "plain name.md"]
    for i, name in enumerate(names):
        body = f"# Note {i}\n\nNote {i} is about the skua{i} setting.\n".encode()
        assert client.post("/api/documents", files=[("files", (name, body, "text/markdown"))]).status_code == 200
    listed = client.get("/api/documents").json()
    assert len({d["doc_id"] for d in listed}) == 4
    assert {d["filename"] for d in listed} >= {"evil_slash.md", "plain name.md"}
    assert all(d["status"] == "INDEXED" for d in listed)


def test_unsupported_type_is_415(server_settings, make_client):
    client = make_client(server_settings)
    response = client.post("/api/documents", files=[("files", ("tool.exe", b"MZ\x90\x00", "application/octet-stream"))])
    assert response.status_code == 415
    assert ".md" in response.json()["detail"]
    # One bad file refuses the whole request: nothing from it is stored.
    mixed = [("files", ("ok.md", NOTE, "text/markdown")), ("files", ("x.docx", b"PK", "application/zip"))]
    assert client.post("/api/documents", files=mixed).status_code == 415
    assert client.get("/api/documents").json() == []


def test_oversized_upload_is_413(server_settings, make_client):
    settings = server_settings.model_copy(
        update={"server": server_settings.server.model_copy(update={"max_upload_mb": 0.01})}
    )
    client = make_client(settings)
    big = b"# Big\n\n" + b"word " * 4000  # ~20 KB > 10 KB
    response = client.post("/api/documents", files=[("files", ("big.md", big, "text/markdown"))])
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert client.get("/api/documents").json() == []


def test_missing_files_field_is_422(server_settings, make_client):
    client = make_client(server_settings)
    assert client.post("/api/documents").status_code == 422


def test_delete_removes_chunks_registry_row_and_stored_file(server_settings, make_client):
    client = make_client(server_settings)
    doc = client.post("/api/documents", files=[("files", ("gone.md", NOTE, "text/markdown"))]).json()["documents"][0]
    stored = server_settings.home / "uploads" / PUBLIC_OWNER / "gone.md"
    assert stored.exists()
    response = client.delete(f"/api/documents/{doc['doc_id']}")
    assert response.status_code == 200
    assert response.json() == {"doc_id": doc["doc_id"], "filename": "gone.md", "deleted": True, "queued": False}
    assert client.get("/api/documents").json() == []
    assert not stored.exists()
    assert client.delete(f"/api/documents/{doc['doc_id']}").status_code == 404
    assert client.delete("/api/documents/not-a-uuid").status_code == 422


def test_open_chunk(server_settings, make_client, make_kb):
    kb = make_kb(server_settings)
    client = make_client(server_settings, kb=kb)
    doc = client.post("/api/documents", files=[("files", ("codes.md", NOTE, "text/markdown"))]).json()["documents"][0]
    [chunk] = [c for c in kb.store.chunks() if c.doc_id == doc["doc_id"]][:1]
    response = client.get(f"/api/chunks/{chunk.chunk_id}")
    assert response.status_code == 200
    assert "zebra-4471" in response.json()["text"]
    assert client.get("/api/chunks/00000000-0000-4000-8000-000000000000").status_code == 404


def test_keyed_owners_see_their_own_and_public_documents_only(keyed_settings, make_client, make_kb):
    kb = make_kb(keyed_settings)
    client = make_client(keyed_settings, kb=kb)
    alice = client.post(
        "/api/documents", files=[("files", ("alice.md", NOTE, "text/markdown"))], headers=auth("key-alice")
    ).json()["documents"][0]
    public = client.post(
        "/api/documents",
        files=[("files", ("handbook.md", b"# Handbook\n\nOffice hours are nine to five.\n", "text/markdown"))],
        headers=auth("key-ops"),
    ).json()["documents"][0]
    assert alice["owner"] == "alice" and public["owner"] == PUBLIC_OWNER
    assert (keyed_settings.home / "uploads" / "alice" / "alice.md").exists()

    as_alice = {d["doc_id"] for d in client.get("/api/documents", headers=auth("key-alice")).json()}
    as_bob = {d["doc_id"] for d in client.get("/api/documents", headers=auth("key-bob")).json()}
    assert as_alice == {alice["doc_id"], public["doc_id"]}
    assert as_bob == {public["doc_id"]}

    # Bob can't tell Alice's document from one that doesn't exist: 404, same body shape, and it is still there.
    response = client.delete(f"/api/documents/{alice['doc_id']}", headers=auth("key-bob"))
    assert response.status_code == 404
    assert response.json() == {"detail": f"No document with id {alice['doc_id']}."}
    alice_chunk = next(c for c in kb.store.chunks() if c.doc_id == alice["doc_id"])
    assert client.get(f"/api/chunks/{alice_chunk.chunk_id}", headers=auth("key-bob")).status_code == 404
    assert client.get(f"/api/chunks/{alice_chunk.chunk_id}", headers=auth("key-alice")).status_code == 200
    # A public document is visible to all, so refusing to delete it can say why.
    response = client.delete(f"/api/documents/{public['doc_id']}", headers=auth("key-bob"))
    assert response.status_code == 403
    assert alice["doc_id"] in {d["doc_id"] for d in client.get("/api/documents", headers=auth("key-alice")).json()}
    assert client.delete(f"/api/documents/{alice['doc_id']}", headers=auth("key-alice")).status_code == 200
