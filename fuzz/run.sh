#!/usr/bin/env bash
# Run each atheris harness for N seconds (default 180). Not part of CI.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      # TARGET: klog launcher pods (default: all)
#
# Seeds come from fuzz/seeds/<target>/ (made from the embedded sample capture); the growing
# corpus and any crash artifacts go under ${FUZZ_WORK:-/tmp/fma-fuzz}, never into git.
# The last lines of each log ("Done N runs in S second(s)") give the number of inputs tried.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
secs="${1:-180}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(klog launcher pods)
work="${FUZZ_WORK:-/tmp/fma-fuzz}"
mkdir -p "$work"
status=0
for t in "${targets[@]}"; do
    corpus="$work/$t-corpus"
    mkdir -p "$corpus" "$work/$t-crashes"
    cp -n "$here/seeds/$t/"* "$corpus/" 2>/dev/null || true
    echo "== $t: ${secs}s, corpus $corpus" >&2
    if ! python "$here/fuzz_$t.py" "$corpus" -max_total_time="$secs" -rss_limit_mb=2048 \
        -max_len=8192 -artifact_prefix="$work/$t-crashes/" >"$work/$t.log" 2>&1; then
        echo "!! $t: crash, see $work/$t.log and $work/$t-crashes/" >&2
        status=1
    fi
    grep -E "^Done [0-9]+ runs|#[0-9]+ *DONE" "$work/$t.log" | tail -1 >&2 || tail -3 "$work/$t.log" >&2
done
exit $status
