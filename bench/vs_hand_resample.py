# How noisy is a ratio of two pipelines' epochs, when both have the same speed? (issue 15)
#   CTNN_VS_HAND_EPOCHS=1 CTNN_VS_HAND_ROUNDS=30 build/bench/bench/bench_pipeline \
#     --benchmark_filter='vs_hand_augment/' 2> epochs.txt
#   python3 bench/vs_hand_resample.py epochs.txt augment auto p2d2
# Pools the epochs of the named settings of one case (lines "<case> <setting> <seconds>..." that
# bench_pipeline prints with CTNN_VS_HAND_EPOCHS=1), as if they were one setting, and draws two
# samples of n epochs from the pool 20,000 times (seeded: the same output every run). Prints, for
# n = 10, 20 and 30 and for the best and the median epoch of each sample, how often the ratio of
# the two samples' figures is below 0.95 and below 0.9: how often the bench would report a slower
# tuner where there is none.
import random, statistics, sys

if len(sys.argv) < 4:
    sys.exit("usage: vs_hand_resample.py EPOCHS_FILE CASE SETTING [SETTING ...]")
path, case, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
pool = []
try:
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) < 3 or fields[0] != case or fields[1] not in settings:
                continue
            try:
                pool += [float(x) for x in fields[2:]]
            except ValueError:
                sys.exit(f"vs_hand_resample.py: {path}:{n}: not a number in '{line.strip()[:60]}'")
except OSError as e:
    sys.exit(f"vs_hand_resample.py: {path}: {e.strerror}")
if len(pool) < 10:
    sys.exit(f"vs_hand_resample.py: {path}: {len(pool)} epochs of case {case}, settings {' '.join(settings)} "
             "(need >= 10)")
print(f"{len(pool)} epochs of {case} {'+'.join(settings)}: median {statistics.median(pool):.4f} s, "
      f"coefficient of variation {statistics.pstdev(pool) / statistics.mean(pool):.3f}")
rng = random.Random(1)
draws = 20000
for n in (10, 20, 30):
    for name, stat in (("best", min), ("median", statistics.median)):
        r = [stat(rng.choices(pool, k=n)) / stat(rng.choices(pool, k=n)) for _ in range(draws)]
        print(f"n {n}, {name} of each: ratio < 0.95 in {100 * sum(x < 0.95 for x in r) / draws:.1f} %, "
              f"< 0.9 in {100 * sum(x < 0.9 for x in r) / draws:.2f} %")
