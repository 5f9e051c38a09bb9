#!/usr/bin/env bash
# A small FlagGems git directory for `harness bisect` on a machine without network, from a
# FlagGems git directory here (a clone's .git or a bare mirror; this script does not fetch):
#
#   benchmarks/fetch_bisect_repo.sh GIT_DIR [OLDEST_REF [TIP_REF [DEST]]]
#
# DEST (default .bisect/FlagGems.git, git-ignored) is a bare, shallow repository holding TIP_REF
# (default master) and every commit back to OLDEST_REF (default v5.3.1), with their trees and
# blobs, and nothing older: FlagGems' history is linear (no merge commits), so a depth of the
# commit count reaches OLDEST_REF exactly. Every tag of the source that lies in that range is
# copied, so `--good v5.3.1 --bad v5.3.4` resolve. What `harness bisect` asks of git works in it:
# rev-parse of the tags, merge-base --is-ancestor, log --first-parent, cat-file of each commit's
# src/ tree (the first listed commit's parent is OLDEST_REF itself) and git archive; a culprit's
# parent is OLDEST_REF or a commit after it, so the culprit check against its parent works too.
# remote.origin.url names FlagGems on GitHub, so bisect.json links each commit.
# v5.3.1..master (389 commits) is about 12 MiB.
set -euo pipefail

usage() { sed -n '2,17p' "$0" >&2; exit 2; }
[[ $# -ge 1 && $# -le 4 ]] || usage
src=$1
oldest=${2:-v5.3.1}
tip=${3:-master}
cd "$(dirname "$0")/.."
dest=${4:-.bisect/FlagGems.git}
g() { git --git-dir="$src" "$@"; }
oldest_sha=$(g rev-parse --verify --quiet "${oldest}^{commit}") || { echo "unknown ref: $oldest" >&2; exit 2; }
tip_sha=$(g rev-parse --verify --quiet "${tip}^{commit}") || { echo "unknown ref: $tip" >&2; exit 2; }
g merge-base --is-ancestor "$oldest_sha" "$tip_sha" || { echo "$oldest is not an ancestor of $tip" >&2; exit 2; }
merges=$(g rev-list --merges --count "$oldest_sha..$tip_sha")
if [[ $merges != 0 ]]; then
  echo "$oldest..$tip holds $merges merge commit(s): a depth would not stop at $oldest on every path" >&2
  exit 2
fi
depth=$(( $(g rev-list --count "$oldest_sha..$tip_sha") + 1 ))

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
git init -q --bare "$dest"
d() { git --git-dir="$dest" "$@"; }
d fetch -q --no-tags --depth="$depth" "file://$(cd "$src" && pwd)" "$tip_sha:refs/heads/${tip//\//_}"
d config remote.origin.url https://github.com/flagos-ai/FlagGems.git
tags=0
while read -r sha ref; do
  if d cat-file -e "$sha^{commit}" 2>/dev/null && g merge-base --is-ancestor "$oldest_sha" "$sha"; then
    d update-ref "$ref" "$sha"
    tags=$((tags + 1))
  fi
done < <(g for-each-ref --format='%(*objectname)%(objectname) %(refname)' refs/tags \
           | awk '{print substr($1, 1, 40), $2}')  # an annotated tag's commit comes first
d gc -q --prune=now
d rev-parse --verify --quiet "${oldest}^{commit}" >/dev/null || { echo "$oldest is not in $dest" >&2; exit 1; }
echo "$dest: $(d rev-list --count "$tip_sha") commit(s), $oldest ($oldest_sha) to $tip ($tip_sha)," \
  "$tags tag(s), $(du -sh "$dest" | cut -f1)"
