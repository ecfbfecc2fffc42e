# The autotuner against hand-tuned settings over a series of bench_pipeline runs (issue 15):
#   for i in $(seq 10); do
#     build/bench/bench/bench_pipeline --benchmark_filter=vs_hand --benchmark_format=json > run$i.json
#   done
#   python3 bench/vs_hand_table.py run*.json
# Prints the per-run markdown table of bench/results/*-pipeline-autotune-*.md (vs_picked / vs_grid, what the tuner
# chose, the grid's best setting, settle epochs), then per case the distribution of vs_picked,
# vs_grid and (where the runs have them) vs_picked_paired, vs_picked_best, vs_grid_best and
# vs_picked_either (min, median, max; runs >= 0.95; runs < 0.9). Since 2026-12-02 vs_picked and
# vs_grid compare median epochs; in runs of 2026-12-01 they compared best epochs (what later runs
# call vs_picked_best, vs_grid_best), and before 2026-12-01 vs_picked was what later runs call
# vs_picked_either (bench/bench_pipeline.cpp, case (d)).
import json, re, statistics, sys

def key(f):
    m = re.search(r'(\d+)\D*$', f)
    return int(m.group(1)) if m else 0

files = sorted(sys.argv[1:], key=key)
if not files:
    sys.exit("usage: vs_hand_table.py run1.json [run2.json ...]")
runs = []
for f in files:
    try:
        runs.append({b['name'].split('/')[0]: b for b in json.load(open(f))['benchmarks']})
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"vs_hand_table.py: {f}: not a complete bench_pipeline JSON file ({e})")
cases = [c for c in ('vs_hand_augment', 'vs_hand_augment_heavy', 'vs_hand_augment_memory') if all(c in r for r in runs)]
if not cases:
    sys.exit("vs_hand_table.py: no vs_hand case is in every file (run with --benchmark_filter=vs_hand)")

def cell(b):
    g = lambda k: int(b[k]) if k in b else '?'
    return (f"{b.get('vs_picked', float('nan')):.2f} / {b['vs_grid']:.2f} "
            f"({g('auto_p')},{g('auto_d')}; {g('grid_p')},{g('grid_d')}; {g('settle_epochs')})")

print("| run | " + " | ".join(f"`{c}` vs_picked / vs_grid (auto p,d; grid p,d; settle epochs)" for c in cases) + " |")
print("| ---: |" + " --- |" * len(cases))
for i, r in enumerate(runs, 1):
    print(f"| {i} | " + " | ".join(cell(r[c]) for c in cases) + " |")
print()
for c in cases:
    for k in ('vs_picked', 'vs_grid', 'vs_picked_paired', 'vs_picked_best', 'vs_grid_best', 'vs_picked_either'):
        v = [r[c][k] for r in runs if k in r[c]]
        if not v:  # vs_picked_paired, _best, _either: older runs lack them
            continue
        print(f"- `{c}`, {k}: min {min(v):.2f}, median {statistics.median(v):.2f}, max {max(v):.2f}; "
              f">= 0.95 in {sum(x >= 0.95 for x in v)} of {len(v)}, < 0.9 in {sum(x < 0.9 for x in v)}")
s = [r[c]['settle_epochs'] for r in runs for c in cases]
ch = [r[c].get('auto_changes', 0) for r in runs for c in cases]
print(f"- settle epochs min {min(s):.0f} median {statistics.median(s):.0f} max {max(s):.0f}; "
      f"knob changes during the timed epochs min {min(ch):.0f} median {statistics.median(ch):.0f} max {max(ch):.0f}")
