#!/usr/bin/env bash
# Runs the README walk-through (scripts/walkthrough.sh) and checks that it prints what README.md
# shows: the JSON blocks between "<!-- walkthrough output -->" and "<!-- end walkthrough output -->",
# in order. Ids, the basis' values and run_ms differ from run to run and are compared by shape
# only, and a finished job's progress may be null or done = total (both occur); every other value must match (numbers to a
# relative 1e-9). Needs a running service
# (BASE, ADMIN as for walkthrough.sh), curl and jq. Prints the walk-through's output.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/walkthrough.sh > "$work/got.json"
awk '/^<!-- walkthrough output -->/ { inside = 1; next }
     /^<!-- end walkthrough output -->/ { inside = 0 }
     inside && /^```json/ { block = 1; next }
     block && /^```/ { block = 0; next }
     block' README.md > "$work/want.json"
cat "$work/got.json"
jq -n --slurpfile got "$work/got.json" --slurpfile want "$work/want.json" '
  def shape: walk(
    if type == "string" then gsub("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"; "<id>")
    elif type == "object" then
      (if has("basis") then .basis |= map(map(type)) else . end)
      | (if has("run_ms") then .run_ms |= type else . end)
      | (if has("progress") then .progress |= (if . == null or .done == .total then "finished" else . end) else . end)
    else . end);
  def leaves: [paths(scalars) as $p | {path: $p, value: getpath($p)}];
  def same($a; $b):
    if ($a | type) == "number" and ($b | type) == "number"
    then (($a - $b) | fabs) <= 1e-9 * ([($a | fabs), ($b | fabs)] | max)
    else $a == $b end;
  if ($got | length) != ($want | length) then
    error("the walk-through printed \($got | length) documents; README.md shows \($want | length)")
  else
    [range(0; $got | length) as $i
     | ($got[$i] | shape | leaves) as $g | ($want[$i] | shape | leaves) as $w
     | if ($g | map(.path)) != ($w | map(.path)) then
         "document \($i + 1): fields differ: printed \($g | map(.path | map(tostring) | join("."))), README.md shows \($w | map(.path | map(tostring) | join(".")))"
       else
         range(0; $g | length) as $j
         | select(same($g[$j].value; $w[$j].value) | not)
         | "document \($i + 1), \($g[$j].path | map(tostring) | join(".")): printed \($g[$j].value), README.md shows \($w[$j].value)"
       end]
    | if length > 0 then error("the walk-through does not print what README.md shows:\n" + join("\n")) else empty end
  end' || { echo "walkthrough-check: README.md's sample output is stale (see above)" >&2; exit 1; }
echo "walkthrough-check: the output matches README.md" >&2
