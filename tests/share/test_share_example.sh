#!/bin/sh
# The example producer and consumer of examples/share_tensor.c in two
# processes: the consumer reads the producer's tensor (sum 120) and doubles
# it, and the producer sees that (x[15] = 30).
set -eu
exe="$1"
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlb-share-example.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$exe" --producer "$dir/sock" >"$dir/producer.out" 2>&1 &
pid=$!
"$exe" --consumer "$dir/sock" >"$dir/consumer.out" 2>&1 || { cat "$dir/consumer.out"; kill "$pid"; exit 1; }
wait "$pid" || { cat "$dir/producer.out"; exit 1; }
cat "$dir/producer.out" "$dir/consumer.out"
grep -qx 'consumer: 4x4, sum 120' "$dir/consumer.out"
grep -qx 'producer: after the consumer: x\[15\] = 30' "$dir/producer.out"
