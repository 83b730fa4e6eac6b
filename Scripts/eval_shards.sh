#!/usr/bin/env bash
# Runs `plinth eval` as N shard processes on this machine and merges their outputs: the recipe
# for fanning one evaluation out over processes, pods or nodes (README: plinth eval).
#
# Usage: Scripts/eval_shards.sh N --output OUT.jsonl [other plinth eval options…]
#   Each shard K writes OUT.jsonl.shard-K-of-N.jsonl (resumable like any eval output: run the same
#   command again after an interruption); when all have finished they are merged into OUT.jsonl.
#   PLINTH (default .build/release/plinth) is the binary; PLINTH_THREADS splits the cores, e.g.
#   PLINTH_THREADS=1 for 2 shards on 2 cores.
set -euo pipefail
n="${1:?usage: eval_shards.sh N --output OUT.jsonl [plinth eval options]}"
shift
plinth="${PLINTH:-$(dirname "$0")/../.build/release/plinth}"
args=("$@")
out=""
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "--output" ]; then out="${args[$((i + 1))]}"; fi
done
[ -n "$out" ] || { echo "eval_shards: give --output" >&2; exit 2; }

pids=()
shards=()
for ((k = 0; k < n; k++)); do
    shard="$out.shard-$k-of-$n.jsonl"
    shards+=("$shard")
    sub=("${args[@]}")
    for ((i = 0; i < ${#sub[@]}; i++)); do
        if [ "${sub[$i]}" = "--output" ]; then sub[$((i + 1))]="$shard"; fi
    done
    "$plinth" eval "${sub[@]}" --shard "$k/$n" --quiet &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
[ "$status" -eq 0 ] || { echo "eval_shards: a shard failed (exit $status); run the same command again to resume" >&2; exit "$status"; }
"$plinth" eval merge "$out" "${shards[@]}"
