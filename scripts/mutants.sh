#!/usr/bin/env bash
# make mutants: cargo-mutants on the code the in-process tests guard
# (MUTANTS_FILES, default src/batch.rs, the parts of src/event/ but its
# JSON reader, and src/store/*.rs): each
# mutant is built and judged by the library's tests (the store's on a fresh
# database each) and the model check of the store (tests/model_store.rs).
# A mutant the tests let through is "missed"; the table of each file's
# caught, missed, timed-out and unviable mutants is written to
# .local/mutants/report.md, the lists to .local/mutants/mutants.out/.
#
#   MUTANTS_FILES    the files to mutate (globs as cargo-mutants takes them)
#   MUTANTS_ITERATE  1: skip the mutants an earlier run here already caught
#                    (a run cut short goes on where it was)
#   MUTANTS_TESTS    names of the tests to judge by (libtest filters, any
#                    of them matching), e.g. "event:: batch:: the_database":
#                    a quick first pass; what it lets through is judged
#                    again by every test with MUTANTS_ITERATE=1 and no
#                    MUTANTS_TESTS, so a filter never counts a mutant missed
#   MUTANTS_RE       only the mutants whose names (`cargo mutants --list`)
#                    match this regular expression, e.g. the functions a
#                    first pass let mutants through in
#   MUTANTS_TARGETS  more test targets to judge by, beside the library's and
#                    the model check's, e.g. "pgbouncer startup_checks" for
#                    code only an integration test reaches (tests/NAME.rs)
#
# The mutated copy is a git worktree in .local/mutants/tree at this commit
# (with the work tree's own changes and new files), with its own target
# directory: the first build is a full one. A mutant takes 10 s to a minute
# on two cores (the store's tests make a database each), so the default
# files are hours: name fewer, or filter the tests first (MUTANTS_TESTS).
# Not beside `make test`: the library's tests use the same database names
# in both, and make test's prune drops them. Installs
# cargo-mutants (pinned) when it is missing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VERSION=27.1.0
out=.local/mutants
tree=$out/tree
event="src/event/cloudevents.rs src/event/decode.rs src/event/fingerprint.rs src/event/reasons.rs src/event/schema.rs"
files=${MUTANTS_FILES:-src/batch.rs $event src/store/*.rs}
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
git -C "$tree" clean --quiet --force -d
git diff HEAD | git -C "$tree" apply --allow-empty
# New files too (a migration the changed statement needs).
git ls-files --others --exclude-standard -z | xargs -0 -r cp --parents -t "$tree"

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
if [[ -n ${MUTANTS_RE:-} ]]; then
    args+=(--re "$MUTANTS_RE")
fi
for target in ${MUTANTS_TARGETS:-}; do
    args+=(-C "--test=$target")
done
if [[ -n ${MUTANTS_TESTS:-} ]]; then
    # shellcheck disable=SC2206 # the names are words on purpose
    args+=(-- -- ${MUTANTS_TESTS})
fi
status=0
# The model check's first failure catches a mutant: no minutes of shrinking.
(cd "$tree" && MODEL_SHRINK_ITERS=0 CARGO_TARGET_DIR="$REPO/$out/target" cargo mutants "${args[@]}") || status=$?

# Exit 2 is "some mutants were missed", 3 "some timed out" (a mutant that
# makes the tests hang: caught): findings, not a failure to run.
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
[[ $status == 0 || $status == 2 || $status == 3 ]]
