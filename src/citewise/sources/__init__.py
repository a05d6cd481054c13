"""Sources: documentation ingested where it lives — a website, a Git repository, a local folder — and kept in sync.

    config.py   [sources.NAME] in citewise.toml and the home; what kind a URL or path is
    state.py    the home's sources table: each source's last run, each document's ETag / hash / blob / commit
    fetch.py    HTTP that reaches only allowed public addresses, bounded, carrying none of Citewise's keys
    web.py      discovery (robots.txt, sitemaps, llms.txt, links) and page reading for website sources
    git.py      a repository at a ref, read by blob id (dulwich)
    anchors.py  section anchors: a page's own heading ids, or the site's slug rule
    sync.py     one sync as the home's writer: read, index the changes, remove what is gone, record

This package sits beside `ingest` and below `agent` and `server`: it imports `ingest`, `index`, `settings`,
`types` and `errors`, and nothing above them.
"""
