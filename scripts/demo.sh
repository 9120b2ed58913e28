#!/usr/bin/env bash
# The README demo: a development listener receives deliveries signed and sent by
# `service-webhooks send` (spec §5.2 signature, §7 classification).
#
# Needs the package with the cli extra installed in the current environment:
#     python -m venv .venv && .venv/bin/pip install -e '.[cli]'
#     PATH=.venv/bin:$PATH bash scripts/demo.sh
#
# Exits 0 when every step behaved as expected, 1 otherwise. PORT=... picks the port
# (default: a free one, else 8765).
set -euo pipefail

fail() {
    echo "demo FAILED: $*" >&2
    if [[ -n "${WORK:-}" && -s "$WORK/listen.log" ]]; then
        echo "--- listener log ---" >&2
        cat "$WORK/listen.log" >&2
    fi
    exit 1
}

command -v service-webhooks >/dev/null || fail "service-webhooks is not on PATH (pip install '.[cli]')"
PYTHON=$(command -v python || command -v python3) || fail "no python on PATH"

PORT=${PORT:-$("$PYTHON" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 8765)}
SECRET=$("$PYTHON" -c 'from service_webhooks import generate_secret; print(generate_secret())')
URL="http://127.0.0.1:$PORT/webhooks"
ORG="o-DEMO-na1"
DATA='{"id": "n-1", "author": "ana@example.com", "text": "Hello from the demo"}'

WORK=$(mktemp -d)
LISTENER=""
cleanup() {
    if [[ -n "$LISTENER" ]] && kill -0 "$LISTENER" 2>/dev/null; then
        kill -TERM "$LISTENER" 2>/dev/null || true
        wait "$LISTENER" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "\$ service-webhooks listen --port $PORT --secret <random> --json &"
service-webhooks listen --port "$PORT" --secret "$SECRET" --json \
    >"$WORK/events.jsonl" 2>"$WORK/listen.log" &
LISTENER=$!

for _ in $(seq 100); do  # up to 10 s
    kill -0 "$LISTENER" 2>/dev/null || fail "the listener exited"
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        break
    fi
    sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || fail "the listener did not accept connections"
echo "listening on $URL"

send() {  # send SECRET: one note.created delivery; prints send's output, returns its exit code
    service-webhooks send "$URL" --secret "$1" --org "$ORG" --allow-private-destinations \
        --event note.created --data "$DATA"
}

echo
echo "\$ service-webhooks send $URL --secret <same> --org $ORG --allow-private-destinations --event note.created --data '$DATA'"
OUT=$(send "$SECRET") || fail "first delivery: $OUT"
echo "$OUT"
grep -q "HTTP 200 OK: success" <<<"$OUT" || fail "first delivery was not a success"

for _ in $(seq 50); do  # the line is flushed as soon as the handler ran
    [[ -s "$WORK/events.jsonl" ]] && break
    sleep 0.1
done
echo
echo "listener stdout:"
cat "$WORK/events.jsonl"
EXPECTED='{"eventName":"note.created","version":1,"organizationId":"'"$ORG"'","data":{"id":"n-1","author":"ana@example.com","text":"Hello from the demo"}}'
[[ "$(cat "$WORK/events.jsonl")" == "$EXPECTED" ]] || fail "unexpected listener output"

echo
echo "\$ (same command again: a duplicate delivery)"
OUT=$(send "$SECRET") || fail "duplicate delivery: $OUT"
echo "$OUT"
grep -q "HTTP 200 OK: success" <<<"$OUT" || fail "the duplicate was not answered 200"
sleep 0.3
[[ $(wc -l <"$WORK/events.jsonl") -eq 1 ]] || fail "the duplicate ran the handler again"
echo "(the handler did not run again: still one line on the listener's stdout)"

echo
echo "\$ (same command with a wrong --secret)"
if OUT=$(send "not-the-secret"); then
    fail "a wrong secret was accepted: $OUT"
fi
echo "$OUT"
grep -q "HTTP 401 Unauthorized: permanent failure" <<<"$OUT" || fail "a wrong secret was not a 401"

echo
echo "demo OK"
