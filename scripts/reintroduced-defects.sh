#!/usr/bin/env bash
# make defects: proof that the model checks find things. Each patch in
# tests/defects/ puts back, in a copy of the checked-out commit, a defect
# found here before (its first lines say which); the model check of the
# store (tests/model_store.rs) then runs on that copy and must fail. Each
# patch in tests/defects/system/ puts back a defect that needs the whole
# system (a database that goes back under the group); the seeded fault
# schedules (scripts/explore.sh) of the seeds its `Seeds:` line names then
# run the copy's binaries and must diverge from the model. Each patch in
# tests/defects/statement/ is a mutant of the batch function or the
# ledger's look-up (SQL, which cargo-mutants does not mutate): the store's
# own tests and the model check run on that copy and one must fail. Prints a table
# (defect, caught or not, seconds, the check's own words) and writes it to
# .local/defects/report.md. Exits non-zero when a defect is not caught or a
# patch no longer applies.
#
#   DEFECT_CASES   cases the model check may take to find each (default 300)
#   DEFECT_SECONDS seconds of load of each schedule (default 40)
#   DEFECT_KINDS   which patches: "store statement system" (default), or
#                  some of them
#
# The copy is a git worktree in .local/defects/tree with its own target
# directory (.local/defects/target): the first build is a full one, the
# next ones rebuild the crate only. Runs beside nothing that prunes the test
# databases (`make test`), like `make verify`.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
cases=${DEFECT_CASES:-300}
out=.local/defects
tree=$out/tree
mkdir -p "$out"
if [[ ! -e $tree/.git ]]; then
    rm -rf "$tree"
    git worktree prune
    git worktree add --detach "$tree" HEAD >/dev/null
fi

report=$out/report.md
{
    echo "| defect put back | caught | seconds | the model check's words |"
    echo "|---|---|---|---|"
} > "$report"
# Puts PATCH back into the copy (this commit and the work tree's own
# changes, so that the patches apply to what is here) and builds it with
# the cargo arguments that follow; on failure, says so in the report.
put_back() {
    local patch=$1 name log
    shift
    name=$(basename "$patch" .patch)
    log=$out/$name.log
    git -C "$tree" checkout --quiet --force --detach "$(git rev-parse HEAD)"
    git diff HEAD | git -C "$tree" apply --allow-empty
    if ! git -C "$tree" apply "$REPO/$patch"; then
        echo "reintroduced-defects: $patch no longer applies" >&2
        echo "| $name | patch does not apply | | |" >> "$report"
        return 1
    fi
    if ! (cd "$tree" && CARGO_TARGET_DIR="$REPO/$out/target" cargo "$@" > "$REPO/$log" 2>&1); then
        echo "reintroduced-defects: $patch does not build (see $log)" >&2
        echo "| $name | patch does not build | | |" >> "$report"
        return 1
    fi
}

missed=0
kinds=${DEFECT_KINDS:-store statement system}
store_patches=() system_patches=()
[[ $kinds == *store* ]] && store_patches=(tests/defects/*.patch)
[[ $kinds == *statement* ]] && store_patches+=(tests/defects/statement/*.patch)
[[ $kinds == *system* ]] && system_patches=(tests/defects/system/*.patch)
for patch in "${store_patches[@]}"; do
    name=$(basename "$patch" .patch)
    log=$out/$name.log
    # A statement mutant is judged by the store's own tests first (a
    # closed day, a clock gone back: cases the model's batches do not make).
    statement=false
    [[ $patch == */statement/* ]] && statement=true
    targets=(--test model_store)
    $statement && targets+=(--lib)
    if ! put_back "$patch" test --features failpoints "${targets[@]}" --no-run; then
        missed=$((missed + 1))
        continue
    fi
    started=$(date +%s)
    store_failed=""
    if $statement && ! (cd "$tree" && CARGO_TARGET_DIR="$REPO/$out/target" \
            cargo test --features failpoints --lib store:: >> "$REPO/$log" 2>&1); then
        store_failed=$(sed -n 's/^---- \(.*\) stdout ----$/\1/p' "$log" | head -3 | tr '\n' ' ')
    fi
    if [[ -n $store_failed ]]; then
        verdict=yes
        words="the store's tests: $store_failed"
    elif (cd "$tree" && MODEL_CASES=$cases CARGO_TARGET_DIR="$REPO/$out/target" \
            cargo test --features failpoints --test model_store >> "$REPO/$log" 2>&1); then
        verdict="**no**"
        words="passed $cases cases"
        $statement && words="passed the store's tests and $cases cases"
        missed=$((missed + 1))
    else
        verdict=yes
        # The first difference the check names (a record's line is p<N>@<offset>).
        words=$(awk '/^Test failed:/ { failed = 1; next }
                     failed && /^  / && !/^  p[0-9]+@/ { print; exit }' "$log" \
                | sed 's/^ *//' | cut -c1-160 | tr '|' '/')
    fi
    echo "| $name | $verdict | $(($(date +%s) - started)) | ${words:-see $log} |" >> "$report"
done
for patch in "${system_patches[@]}"; do
    name=$(basename "$patch" .patch)
    log=$out/$name.log
    if ! put_back "$patch" build --workspace --bins; then
        missed=$((missed + 1))
        continue
    fi
    read -r -a seeds <<<"$(sed -n 's/^Seeds: //p' "$patch")"
    started=$(date +%s)
    INBOX_BIN_DIR="$REPO/$out/target/debug" EXPLORE_OUT="$out/explore-$name" \
        EXPLORE_SECONDS=${DEFECT_SECONDS:-40} EXPLORE_RATE=150 \
        scripts/explore.sh "${seeds[@]}" >> "$log" 2>&1 || true
    diverged=$(grep -c '^DIVERGENCE' "$log" || true)
    if ((diverged > 0)); then
        verdict="yes ($diverged of ${#seeds[@]} seeds)"
        words=$(grep -m 1 -A 40 '^DIVERGENCE' "$log" | grep -m 1 '^  [a-z]' \
                | sed 's/^ *//' | cut -c1-160 | tr '|' '/')
    else
        verdict="**no**"
        words="no divergence in seeds ${seeds[*]}"
        missed=$((missed + 1))
    fi
    echo "| $name | $verdict | $(($(date +%s) - started)) | ${words:-see $log} |" >> "$report"
done
git -C "$tree" checkout --quiet --force -- .
cat "$report"
((missed == 0))
