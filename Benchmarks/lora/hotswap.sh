#!/bin/sh
# Hot-swap and merge figures of issue 19, on SmolLM2:
#  - batched decode of 16 sequences over 4 different rank-16 adapters (unmerged) against the
#    same 16 sequences with no adapter, alternating runs in one script: the ratio of tg t/s;
#  - the time `plinth adapters merge` takes for one rank-16 adapter (all seven matrices).
# Usage: sh Benchmarks/lora/hotswap.sh [ROUNDS]   (after swift build -c release)
set -eu
cd "$(dirname "$0")/../.."
PLINTH=.build/release/plinth
ROUNDS=${1:-3}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
python3 Benchmarks/lora/make_random_adapters.py "$DIR" --count 4 --rank 16 > /dev/null
A="--adapter $DIR/random-r16-0 --adapter $DIR/random-r16-1 --adapter $DIR/random-r16-2 --adapter $DIR/random-r16-3"
tg() { "$PLINTH" bench --parallel 16 -p 64 -n 64 -r 3 --json "$@" 2>/dev/null | python3 -c 'import json,sys; print([r for r in json.load(sys.stdin)["results"] if r["kind"]=="tg"][0]["median_ts"])'; }
i=0
while [ $i -lt "$ROUNDS" ]; do
  base=$(tg); lora=$(tg $A)
  python3 -c "print(f'round $i: no adapter {float($base):.1f} t/s, 4 adapters {float($lora):.1f} t/s, ratio {float($lora)/float($base):.3f}')"
  i=$((i + 1))
done
"$PLINTH" adapters merge --adapter "$DIR/random-r16-0" -o "$DIR/merged.gguf" 2>&1 | tail -1
