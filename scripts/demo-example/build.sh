#!/usr/bin/env bash
# What a real build script does, in small: a parallel make, a pipeline, a
# background job, an orphan that outlives its parent, and a step that fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here"/Makefile "$here"/*.c "$work"/
cd "$work"

echo "-- make -j4"
make -s -j4

echo "-- pipeline"
seq 1 5000 | grep 7 | sort -rn | head -3

echo "-- xargs fan-out"
printf '%s\n' alpha beta gamma delta | xargs -n1 -P2 sh -c 'echo "worker: $0"' | sort

echo "-- background job"
( sleep 0.2; echo "background job finished" ) &

echo "-- orphan (its parent exits at once)"
( ( sleep 0.4; echo "orphan finished after its parent" ) & )

echo "-- a step that fails"
sh -c 'echo "checking something..."; exit 3' || echo "step failed with exit code $?"

./app
wait
echo "-- done"
