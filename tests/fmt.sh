#!/usr/bin/env bash
# The fmt stage: `cargo fmt --check` over every crate of the repository (the workspace, and the crates
# outside it: fuzz/, tests/interop/client/), each with its own edition; then every Rust file git tracks must
# be one of those it checked. rustfmt reaches a file only through a `mod` it can see: one declared by a
# macro (as src/lib.rs once declared its modules) or a crate no manifest here names would never be checked,
# and the stage would pass without seeing it. Then every tracked file by itself, with bare rustfmt. Prints
# the files it did not reach, and the diffs.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
checked=$(mktemp)
trap 'rm -f "$checked"' EXIT
status=0
for manifest in $(git ls-files '*Cargo.toml'); do
    out=$(cargo fmt --manifest-path "$manifest" --all -- --check --verbose 2>&1) || status=1
    sed -n 's/^Formatting //p' <<< "$out" >> "$checked"
    # The diffs and errors, without rustfmt's verbose lines.
    grep -vE '^(Formatting|Using rustfmt config file|Spent) ' <<< "$out" || true
done
# And file by file, as an editor or a bare `rustfmt FILE` formats it (no crate, no edition: rustfmt.toml
# says which): the same style must hold, or what one tool writes the other undoes.
mapfile -t tracked < <(git ls-files '*.rs')
if ! bare=$(rustfmt --check "${tracked[@]}" 2>&1); then
    echo "fmt: rustfmt, file by file, would change:"
    grep -E '^Diff in ' <<< "$bare" | sed 's/^/    /'
    grep -vE '^Diff in ' <<< "$bare" | head -n 40
    status=1
fi
unreached=$(git ls-files '*.rs' | sed "s|^|$ROOT/|" | sort -u | comm -23 - <(sort -u "$checked"))
if [ -n "$unreached" ]; then
    echo "fmt: cargo fmt did not reach these files (declared where rustfmt cannot see, or in no crate):"
    sed 's/^/    /' <<< "$unreached"
    status=1
fi
echo "fmt: $(sort -u "$checked" | wc -l) files checked, $(grep -c . <<< "$unreached") not reached"
exit $status
