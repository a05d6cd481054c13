"""Git sources: a repository, read at a branch, a tag or a commit, without a working tree.

A local path is read in place; a clone URL is mirrored (bare) under `CITEWISE_HOME/sources/git/NAME.git` and
fetched on every sync. dulwich does the Git work in pure Python: no `git` binary is needed at run time.

What a sync reads is decided by blob ids: a file whose blob is the one the last sync read is not read again, a
path that is gone is removed, and a renamed file is a removal plus an addition (its vectors are re-embedded: the
index keys stored vectors by document). Each document records the commit it was read at, and its citation URL
comes from the source's template (`{ref}`, `{commit}`, `{path}`, `{page}`), deep-linked to the section with the
slug rule of the site that renders it.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from citewise.errors import ConfigError, IngestError, SourceError
from citewise.ingest.globs import any_match, asks_for_template, is_theme_template
from citewise.settings import Settings, SourceSpec
from citewise.sources.config import redact_url
from citewise.sources.fetch import checked_pool_manager, resolve_checked

_URL_PREFIXES = ("http://", "https://", "git://", "ssh://", "git@")
_INDEX_PAGES = frozenset({"index", "readme", "_index"})
_REGULAR_FILE = 0o100000  # mode bits of a blob that is a file (not a symlink, not a submodule)


def is_remote(location: str) -> bool:
    return location.startswith(_URL_PREFIXES)


def scp_host_path(location: str) -> tuple[str, str]:
    """The host and path of an scp-form remote, `git@HOST:PATH` (`git@[::1]:PATH` for an IPv6 address)."""
    rest = location[4:]
    if rest.startswith("[") and "]" in rest:
        host, _, after = rest[1:].partition("]")
        return host, after.removeprefix(":")
    host, _, path = rest.partition(":")
    return host, path


def remote_endpoint(location: str) -> tuple[str, int] | None:
    """The host and port a clone URL connects to first (SSH's 22 for the scp form), or None for a local path."""
    if location.startswith("git@"):
        return scp_host_path(location)[0], 22
    if not is_remote(location):
        return None
    parts = urlsplit(location)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or {"http": 80, "https": 443, "git": 9418, "ssh": 22}[parts.scheme]


def default_template(location: str) -> str | None:
    """The blob-view URL of a repository on GitHub or GitLab, when the clone URL says it is one."""
    if location.startswith("git@"):
        host, path = scp_host_path(location)
    elif is_remote(location):
        parts = urlsplit(location)
        host, path = parts.hostname or "", parts.path
    else:
        return None
    path = path.strip("/").removesuffix(".git")
    if host == "github.com" and path.count("/") == 1:
        return f"https://github.com/{path}/blob/{{ref}}/{{path}}"
    if host == "gitlab.com" and path:
        return f"https://gitlab.com/{path}/-/blob/{{ref}}/{{path}}"
    return None


def page_of(relative: str) -> str:
    """`{page}`: a file's path without its suffix, an index/README page as its folder ("guide/" for guide/index.md)."""
    path = PurePosixPath(relative)
    stem = path.with_suffix("")
    if stem.name.lower() in _INDEX_PAGES:
        parent = str(stem.parent)
        return "" if parent == "." else parent + "/"
    return str(stem)


@dataclass
class Snapshot:
    commit: str  # full sha
    ref: str  # the name {ref} stands for: the branch or tag asked for, else HEAD's branch, else the commit
    files: dict[str, str]  # repository path → blob id, after include/exclude
    templates: list[str] = field(default_factory=list)  # theme and template files left out (paths under the root)


class GitRepository:
    def __init__(self, name: str, spec: SourceSpec, settings: Settings) -> None:
        self.name = name
        self.spec = spec
        self.settings = settings
        self.location = spec.url
        self.template = spec.url_template or default_template(spec.url)
        self._repo = None

    def open(self):
        from dulwich.errors import NotGitRepository
        from dulwich.repo import Repo

        if not is_remote(self.location):
            path = Path(self.location).expanduser()
            if not path.exists():
                raise SourceError(f"{self.location}: no such folder")
            try:
                self._repo = Repo(str(path))
            except NotGitRepository:
                raise SourceError(f"{self.location} is not a Git repository") from None
            return self._repo
        self._repo = self._mirror()
        return self._repo

    def _mirror(self):
        from dulwich import porcelain
        from dulwich.repo import Repo

        # The host is checked before dulwich connects (an SSH or git:// remote is then dulwich's or ssh's own
        # connection); over HTTP(S), every connection dulwich opens, redirects included, goes through the same check.
        endpoint = remote_endpoint(self.location)
        if endpoint is not None:
            resolve_checked(*endpoint, allow_private=self.spec.allow_private_network)
        transport = {}
        if self.location.startswith(("http://", "https://")):
            from dulwich.client import default_user_agent_string

            transport["pool_manager"] = checked_pool_manager(
                allow_private=self.spec.allow_private_network,
                user_agent=default_user_agent_string(),
                timeout_s=self.settings.sync.request_timeout_s,
            )
        target = self.settings.sources_dir / "git" / f"{self.name}.git"
        errors = io.BytesIO()
        try:
            if not (target / "HEAD").exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                porcelain.clone(self.location, str(target), bare=True, checkout=False, errstream=errors, **transport)
                return Repo(str(target))
            repo = Repo(str(target))
            config = repo.get_config()
            config.set((b"remote", b"origin"), b"url", self.location.encode())
            config.write_to_path()
            self._fetch(repo, transport, errors)
            return repo
        except Exception as exc:  # dulwich raises many kinds (HangupException, GitProtocolError, OSError, ...)
            detail = errors.getvalue().decode("utf-8", "replace").strip().splitlines()
            shown = redact_url(self.location)
            message = str(exc).replace(self.location, shown)
            raise SourceError(
                f"cannot fetch {shown}: {type(exc).__name__}: {message}" + (f" ({detail[-1]})" if detail else "")
            ) from exc

    def _fetch(self, repo, transport: dict, errors: io.BytesIO) -> None:
        """`git fetch origin` into the mirror: the remote's branches move refs/remotes/origin/*, its tags refs/tags/*.
        Through the client rather than porcelain.fetch, which takes no pool manager."""
        from dulwich.client import get_transport_and_path
        from dulwich.protocol import strip_peeled_refs

        client, path = get_transport_and_path(self.location, config=repo.get_config_stack(), **transport)
        result = client.fetch(path, repo, progress=errors.write)
        refs = {name: sha for name, sha in strip_peeled_refs(result.refs).items() if sha is not None}
        for prefix, base in ((b"refs/heads/", b"refs/remotes/origin"), (b"refs/tags/", b"refs/tags")):
            repo.refs.import_refs(
                base, {name[len(prefix) :]: sha for name, sha in refs.items() if name.startswith(prefix)}
            )

    def snapshot(self) -> Snapshot:
        from dulwich.object_store import iter_tree_contents
        from dulwich.objects import Commit

        repo = self._repo or self.open()
        commit_id, ref = self._resolve(repo)
        commit = repo[commit_id]
        if not isinstance(commit, Commit):
            raise SourceError(f"{self.spec.ref or 'HEAD'} of {self.location} is not a commit")
        root = self.spec.root.strip("/")
        include = self.spec.include or self.settings.ingest.globs
        files: dict[str, str] = {}
        templates: list[str] = []
        for entry in iter_tree_contents(repo.object_store, commit.tree):
            if entry.path is None or entry.mode is None or entry.sha is None:
                continue
            if entry.mode & 0o170000 != _REGULAR_FILE:
                continue
            path = entry.path.decode("utf-8", "replace")
            if root and not path.startswith(root + "/"):
                continue
            relative = path[len(root) + 1 :] if root else path
            if any(part.startswith(".") for part in PurePosixPath(relative).parts[:-1]):
                continue
            if any_match(relative, include) and not any_match(relative, self.spec.exclude):
                # As a folder walk does (ingest/globs.py): theme and template files stay out unless a glob asks.
                # Only an HTML file outside the theme folders is read to tell, its blob by the id.
                read = lambda blob=entry.sha: repo[blob].as_raw_string()  # noqa: E731 - read only if need be
                if is_theme_template(relative, read) and not asks_for_template(relative, include):
                    templates.append(relative)
                    continue
                files[path] = entry.sha.decode("ascii")
        return Snapshot(commit=commit_id.decode("ascii"), ref=ref, files=files, templates=sorted(templates))

    def _resolve(self, repo) -> tuple[bytes, str]:
        from dulwich.objects import Tag

        def peel(sha: bytes) -> bytes:
            obj = repo[sha]
            while isinstance(obj, Tag):
                obj = repo[obj.object[1]]
            return obj.id

        refs = repo.get_refs()
        wanted = self.spec.ref
        if wanted is None:
            if refs.get(b"HEAD") is None:
                raise SourceError(f"{self.location} has no HEAD: name a branch or tag with --ref")
            chain, sha = repo.refs.follow(b"HEAD")
            names = [n.decode() for n in chain if n != b"HEAD"]
            if not names:  # a detached HEAD: that commit
                return peel(sha), sha.decode()
            wanted = _short(names[-1])  # a mirror's HEAD names the default branch; fetches move origin/<branch>
        for candidate in (f"refs/remotes/origin/{wanted}", f"refs/heads/{wanted}", f"refs/tags/{wanted}", wanted):
            sha = refs.get(candidate.encode())
            if sha is not None:
                return peel(sha), wanted
        if len(wanted) >= 7 and all(c in "0123456789abcdef" for c in wanted.lower()):
            matches = [sha for sha in repo.object_store if sha.decode().startswith(wanted.lower())]
            if len(matches) == 1:
                return peel(matches[0]), wanted
        branches = sorted(n.decode().split("/", 2)[-1] for n in refs if n.startswith((b"refs/heads/", b"refs/tags/")))
        raise SourceError(
            f"{self.location} has no branch, tag or commit {wanted!r}"
            + (f" (it has: {', '.join(branches[:20])})" if branches else "")
        )

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def read(self, path: str, blob: str) -> bytes:
        repo = self._repo or self.open()
        data = repo[blob.encode("ascii")].as_raw_string()
        cap = int(self.settings.sync.max_page_mb * 1024 * 1024)
        if len(data) > cap:
            limit = self.settings.sync.max_page_mb
            name = PurePosixPath(path).name
            raise IngestError(f"{name}: {len(data) / 1048576:.1f} MB is over the {limit:g} MB cap (sync.max_page_mb)")
        return data

    def source_url(self, snapshot: Snapshot, path: str) -> str | None:
        if not self.template:
            return None
        root = self.spec.root.strip("/")
        relative = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
        return self.template.format(ref=snapshot.ref, commit=snapshot.commit, path=path, page=page_of(relative))

    def layout(self, snapshot: Snapshot) -> str:
        """What, besides a blob, decides a document's chunks: a change here re-reads every file (vectors are kept)."""
        return hashlib.sha256(
            f"{self.template}\0{self.spec.slugs}\0{self.spec.root}\0{snapshot.ref}".encode()
        ).hexdigest()[:16]


def _short(refname: str) -> str:
    for prefix in ("refs/remotes/origin/", "refs/heads/", "refs/tags/"):
        if refname.startswith(prefix):
            return refname[len(prefix) :]
    return refname


def document_source(name: str, path: str) -> str:
    """A Git document's identity (its doc_id derives from it): the source's name and the path in the repository."""
    return f"sources/{name}/{path}"


def check_location(spec: SourceSpec) -> None:
    if not is_remote(spec.url) and not Path(spec.url).expanduser().exists():
        raise ConfigError(f"{spec.url}: no such folder")
