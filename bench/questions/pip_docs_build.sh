#!/usr/bin/env bash
# Rebuild the pip-docs corpus from Debian's python3-pip documentation.
# Usage: pip_docs_build.sh TARGET_DIR
# Copies every .md/.rst file (decompressing .gz, dropping the suffix) from
# /usr/share/doc/python3-pip/html, excluding news.rst, copyright.rst and development/.
set -euo pipefail
SRC=/usr/share/doc/python3-pip/html
DST=${1:?usage: $0 TARGET_DIR}
mkdir -p "$DST"
cd "$SRC"
find . -type f \( -name '*.md' -o -name '*.rst' -o -name '*.md.gz' -o -name '*.rst.gz' \) \
  -not -path './development/*' -not -name 'news.rst*' -not -name 'copyright.rst*' -print0 |
while IFS= read -r -d '' f; do
  rel=${f#./}
  case "$rel" in
    *.gz) out="$DST/${rel%.gz}"; mkdir -p "$(dirname "$out")"; gzip -dc "$f" > "$out" ;;
    *)    out="$DST/$rel";       mkdir -p "$(dirname "$out")"; cp "$f" "$out" ;;
  esac
done
