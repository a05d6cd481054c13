#!/usr/bin/env bash
# The "before" columns of quote mode's figures: an earlier commit's code asked the question sets of
# bench/quote_data.py (this checkout's sets, that commit's Citewise), into bench/data/quote_<commit>/.
# Usage: bench/baselines.sh COMMIT...   (run from the repository root; uses .venv)
#        SETS="somnia_b pip_docs" bench/baselines.sh COMMIT...   (only those sets; default: every set)
# Then `.venv/bin/python bench/fit_quote_decision.py --baselines-only` adds them to bench/results/quote_decision.json.
set -euo pipefail
for commit in "$@"; do
  tree="$(mktemp -d)/citewise-$commit"
  git worktree add --detach -q "$tree" "$commit"
  # shellcheck disable=SC2086  # SETS is a list of set names
  CITEWISE_QUOTE_DATA="bench/data/quote_$commit" PYTHONPATH="$tree/src" .venv/bin/python bench/quote_data.py \
    ${SETS:+--set $SETS}
  git worktree remove --force "$tree"
done
