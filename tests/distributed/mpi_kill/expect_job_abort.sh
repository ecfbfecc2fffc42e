#!/bin/sh
# expect_job_abort.sh MPIRUN PROGRAM [LIMIT_S]: runs PROGRAM on 2 ranks (mpi_killed_rank.cpp) and
# passes when rank 1 killed itself, mpirun returned non-zero within LIMIT_S seconds (default 60),
# and rank 0 never returned from fit. A hang (the time limit reached) fails.
mpirun=$1
prog=$2
limit=${3:-60}
start=$(date +%s)
out=$(timeout -k 10 "$limit" "$mpirun" -np 2 --allow-run-as-root --oversubscribe "$prog" 2>&1)
rc=$?
end=$(date +%s)
printf '%s\n' "$out"
echo "mpirun returned $rc after $((end - start)) s (limit $limit s)"
# timeout's own statuses: 124 (TERM), 137 after -k's KILL; mpirun itself returns 137 for a rank
# killed by signal 9, so the elapsed time tells a hang
if [ "$rc" -eq 124 ] || [ $((end - start)) -ge "$limit" ]; then echo "FAIL: the job did not end within $limit s (a rank hangs)"; exit 1; fi
if [ "$rc" -eq 0 ]; then echo "FAIL: mpirun returned 0 although rank 1 was killed"; exit 1; fi
if ! printf '%s\n' "$out" | grep -q "rank 1: raising SIGKILL"; then echo "FAIL: rank 1 never reached its kill point"; exit 1; fi
if printf '%s\n' "$out" | grep -q "rank 0: fit returned"; then echo "FAIL: rank 0 finished fit without rank 1"; exit 1; fi
echo "PASS: the job ended with status $rc"
