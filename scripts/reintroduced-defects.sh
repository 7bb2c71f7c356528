#!/usr/bin/env bash
# make defects: proof that the model check finds things. Each patch in
# tests/defects/ puts back, in a copy of the checked-out commit, a defect
# found here before (its first lines say which); the model check
# (tests/model_store.rs) then runs on that copy and must fail. Prints a
# table (defect, caught or not, seconds, the check's own words) and writes
# it to .local/defects/report.md. Exits non-zero when a defect is not
# caught or a patch no longer applies.
#
#   DEFECT_CASES   cases the model check may take to find each (default 300)
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
missed=0
for patch in tests/defects/*.patch; do
    name=$(basename "$patch" .patch)
    # This commit and the work tree's own changes, so that the patches
    # apply to what is here.
    git -C "$tree" checkout --quiet --force --detach "$(git rev-parse HEAD)"
    git diff HEAD | git -C "$tree" apply --allow-empty
    if ! git -C "$tree" apply "$REPO/$patch"; then
        echo "reintroduced-defects: $patch no longer applies" >&2
        echo "| $name | patch does not apply | | |" >> "$report"
        missed=$((missed + 1))
        continue
    fi
    log=$out/$name.log
    if ! (cd "$tree" && CARGO_TARGET_DIR="$REPO/$out/target" \
            cargo test --features failpoints --test model_store --no-run > "$REPO/$log" 2>&1); then
        echo "reintroduced-defects: $patch does not build (see $log)" >&2
        echo "| $name | patch does not build | | |" >> "$report"
        missed=$((missed + 1))
        continue
    fi
    started=$(date +%s)
    if (cd "$tree" && MODEL_CASES=$cases CARGO_TARGET_DIR="$REPO/$out/target" \
            cargo test --features failpoints --test model_store >> "$REPO/$log" 2>&1); then
        verdict="**no**"
        words="passed $cases cases"
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
git -C "$tree" checkout --quiet --force -- .
cat "$report"
((missed == 0))
