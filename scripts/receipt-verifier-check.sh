#!/usr/bin/env bash
# The independent receipt verifier (scripts/receipt_verifier.py) against the committed fixtures
# of crates/core/src/transparency (tests/fixtures/transparency/): its own known answers, every valid
# fixture accepted, and copies with one byte changed in the leaf, the proof, the signature or
# the note text refused. Needs python3 only, no build.
set -euo pipefail
cd "$(dirname "$0")/.."
verifier=scripts/receipt_verifier.py
fixtures=tests/fixtures/transparency
key="$(cat "$fixtures/verifier_key.txt")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 "$verifier" selftest

passed=0
failed=0
expect() { # expect ok|bad <verifier arguments…>
  local want="$1"
  shift
  local got=bad
  if python3 "$verifier" "$@" >/dev/null 2>"$work/stderr"; then got=ok; fi
  if [ "$got" = "$want" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: expected $want: $*" >&2
    cat "$work/stderr" >&2
  fi
}

for receipt in "$fixtures"/receipt_*.json; do
  expect ok receipt --key "$key" "$receipt"
  for part in leaf proof signature text; do
    python3 - "$receipt" "$part" >"$work/tampered.json" <<'EOF'
import base64, json, sys
receipt = json.load(open(sys.argv[1]))
def flip(b64, at):
    data = bytearray(base64.b64decode(b64))
    data[at % len(data)] ^= 1
    return base64.b64encode(bytes(data)).decode()
part = sys.argv[2]
if part == "leaf":
    receipt["leaf"] = flip(receipt["leaf"], 10)
elif part == "proof":
    receipt["inclusion_proof"][-1] = flip(receipt["inclusion_proof"][-1], 5)
elif part == "signature":
    text, line = receipt["checkpoint"].rsplit("\n\n", 1)
    head, sig = line.rstrip("\n").rsplit(" ", 1)
    receipt["checkpoint"] = f"{text}\n\n{head} {flip(sig, 20)}\n"
else:
    receipt["checkpoint"] = receipt["checkpoint"].replace("/datasets/", "/dataset5/", 1)
json.dump(receipt, sys.stdout)
EOF
    expect bad receipt --key "$key" "$work/tampered.json"
  done
done
expect ok consistency --key "$key" "$fixtures/checkpoint_3.txt" "$fixtures/checkpoint_7.txt" "$fixtures/consistency_3_7.json"
expect bad consistency --key "$key" "$fixtures/checkpoint_7.txt" "$fixtures/checkpoint_3.txt" "$fixtures/consistency_3_7.json"
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["proof"][0] = "A" + p["proof"][0][1:]; print(json.dumps(p))' \
  "$fixtures/consistency_3_7.json" >"$work/proof.json"
expect bad consistency --key "$key" "$fixtures/checkpoint_3.txt" "$fixtures/checkpoint_7.txt" "$work/proof.json"
echo "receipt verifier on the fixtures: $passed passed, $failed failed"
[ "$failed" = 0 ]
