#!/bin/sh
# requeue.sh MPIRUN PROGRAM [LIMIT_S]: a distributed search whose rank 1 is killed mid-trial, then
# the same search again on 2 ranks (mpi_tuner_killed.cpp): passes when the first job ended
# non-zero within LIMIT_S seconds (default 60) after rank 1's kill, and the second finished the
# search with the killed trial re-queued ("resume: PASS").
mpirun=$1
prog=$2
limit=${3:-60}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ctnn_requeue.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
out=$(timeout -k 10 "$limit" "$mpirun" -np 2 --allow-run-as-root --oversubscribe "$prog" kill "$dir" 2>&1)
rc=$?
end=$(date +%s)
printf '%s\n' "$out"
echo "the killed job: mpirun returned $rc after $((end - start)) s (limit $limit s)"
if [ "$rc" -eq 124 ] || [ $((end - start)) -ge "$limit" ]; then echo "FAIL: the job did not end within $limit s"; exit 1; fi
if [ "$rc" -eq 0 ]; then echo "FAIL: mpirun returned 0 although rank 1 was killed"; exit 1; fi
if ! printf '%s\n' "$out" | grep -q "rank 1: raising SIGKILL"; then echo "FAIL: rank 1 never reached its kill point"; exit 1; fi
out=$(timeout -k 10 "$limit" "$mpirun" -np 2 --allow-run-as-root --oversubscribe "$prog" resume "$dir" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ] || ! printf '%s\n' "$out" | grep -q "resume: PASS"; then echo "FAIL: the resumed search (status $rc)"; exit 1; fi
echo "PASS"
