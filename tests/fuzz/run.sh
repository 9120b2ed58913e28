#!/usr/bin/env bash
# Bounded fuzz run of both atheris targets; exits non-zero on a crash.
#
#   tests/fuzz/run.sh                 # 60 s per target
#   FUZZ_SECONDS=300 tests/fuzz/run.sh
#
# Env: FUZZ_SECONDS (default 60), PYTHON (default .venv/bin/python, else python3),
# FUZZ_ARTIFACTS (where a crashing input is saved; default a scratch directory, which
# is kept and printed on a crash). New inputs libFuzzer finds go to a scratch corpus:
# the committed seeds under tests/fuzz/corpus/ are read, never written.
# Prints, per target, the number of inputs tried (libFuzzer's "Done N runs").
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${FUZZ_SECONDS:-60}"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
if ! "$python" -c "import atheris" 2>/dev/null; then
    echo "fuzz: atheris is not installed for $python (pip install atheris)" >&2
    exit 2
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/sw-fuzz.XXXXXX")"
artifacts="${FUZZ_ARTIFACTS:-$scratch/artifacts}"
mkdir -p "$artifacts"
status=0
summary=()

for target in header envelope; do
    corpus="$scratch/corpus-$target"
    log="$scratch/$target.log"
    mkdir -p "$corpus"
    echo "fuzz: $target for ${seconds}s"
    "$python" "$here/fuzz_$target.py" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -dict="$here/$target.dict" -artifact_prefix="$artifacts/$target-" \
        -print_final_stats=1 "$corpus" "$here/corpus/$target" >"$log" 2>&1
    code=$?
    runs="$(grep -Eo '^Done [0-9]+ runs' "$log" | tail -1 | grep -Eo '[0-9]+')"
    if [[ -z "$runs" ]]; then
        runs="$(grep -Eo '^#[0-9]+' "$log" | tail -1 | tr -d '#')"
    fi
    if [[ $code -ne 0 ]]; then
        status=1
        echo "fuzz: $target CRASHED (exit $code) after ${runs:-?} inputs; log: $log" >&2
        grep -A30 -E 'Uncaught Python exception|ERROR: libFuzzer' "$log" | head -60 >&2
        ls "$artifacts" >&2
        summary+=("$target: CRASH after ${runs:-?} inputs")
    else
        summary+=("$target: ${runs:-?} inputs in ${seconds}s, no crash")
    fi
done

echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
if [[ $status -eq 0 ]]; then
    rm -rf "$scratch"
else
    echo "fuzz: logs and crashing inputs kept in $scratch (artifacts: $artifacts)" >&2
fi
exit $status
