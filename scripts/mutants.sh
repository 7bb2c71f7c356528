#!/usr/bin/env bash
# make mutants: cargo-mutants on the code the in-process tests guard
# (MUTANTS_FILES, default src/batch.rs src/event.rs src/store/*.rs): each
# mutant is built and judged by the library's tests (the store's on a fresh
# database each) and the model check of the store (tests/model_store.rs).
# A mutant the tests let through is "missed"; the table of each file's
# caught, missed, timed-out and unviable mutants is written to
# .local/mutants/report.md, the lists to .local/mutants/mutants.out/.
#
#   MUTANTS_FILES    the files to mutate (globs as cargo-mutants takes them)
#   MUTANTS_ITERATE  1: skip the mutants an earlier run here already caught
#                    (a run cut short goes on where it was)
#
# The mutated copy is a git worktree in .local/mutants/tree at this commit
# (with the work tree's own changes), with its own target directory: the
# first build is a full one. A mutant takes about a minute on two cores
# (the store's tests make a database each), so the default files are hours:
# name fewer. Not beside `make test`: the library's tests use the same
# database names in both, and make test's prune drops them. Installs
# cargo-mutants (pinned) when it is missing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VERSION=27.1.0
out=.local/mutants
tree=$out/tree
files=${MUTANTS_FILES:-src/batch.rs src/event.rs src/store/*.rs}
mkdir -p "$out"
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
    cargo install --locked cargo-mutants --version "$VERSION"
fi
if [[ ! -e $tree/.git ]]; then
    rm -rf "$tree"
    git worktree prune
    git worktree add --detach "$tree" HEAD >/dev/null
fi
git -C "$tree" checkout --quiet --force --detach "$(git rev-parse HEAD)"
git diff HEAD | git -C "$tree" apply --allow-empty

# A mutant that makes the tests hang is caught once it takes 2.5 times the
# unmutated tests' time (at least a minute), not the default 5 times.
args=(--in-place --output "$REPO/$out" --timeout-multiplier 2.5 --minimum-test-timeout 60
      -C --lib -C --test=model_store)
results=$out/mutants.out
# An iterating run tests only what was not caught before and lists only
# that: what earlier runs caught, or found unviable, is kept to be counted.
kept=$out/kept
rm -rf "$kept" && mkdir -p "$kept"
if [[ ${MUTANTS_ITERATE:-0} == 1 ]]; then
    args+=(--iterate)
    for kind in caught unviable; do
        cp "$results/$kind.txt" "$kept/" 2>/dev/null || true
    done
fi
for file in $files; do
    args+=(--file "$file")
done
status=0
# The model check's first failure catches a mutant: no minutes of shrinking.
(cd "$tree" && MODEL_SHRINK_ITERS=0 CARGO_TARGET_DIR="$REPO/$out/target" cargo mutants "${args[@]}") || status=$?

# Exit 2 is "some mutants were missed": a finding, not a failure to run.
for kind in caught unviable; do
    touch "$kept/$kind.txt"
    sort -u "$results/$kind.txt" "$kept/$kind.txt" -o "$results/$kind.txt"
done
{
    echo "| file | caught | missed | timeout | unviable | caught of the viable |"
    echo "|---|---|---|---|---|---|"
    for file in $(cat "$results"/{caught,missed,timeout,unviable}.txt | cut -d: -f1 | sort -u); do
        count() { grep -c "^$file:" "$results/$1.txt" || true; }
        caught=$(count caught) missed=$(count missed) timeout=$(count timeout) unviable=$(count unviable)
        viable=$((caught + missed + timeout))
        share=$(( viable > 0 ? 100 * (caught + timeout) / viable : 0 ))
        echo "| $file | $caught | $missed | $timeout | $unviable | $share % |"
    done
} > "$out/report.md"
cat "$out/report.md"
echo "missed: $results/missed.txt"
[[ $status == 0 || $status == 2 ]]
