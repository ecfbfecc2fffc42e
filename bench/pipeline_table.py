# Median table of several bench_pipeline runs: python3 bench/pipeline_table.py run1.json run2.json ...
import json,sys,statistics as st
files=sys.argv[1:]
runs=[{b['name'].split('/')[0]:b for b in json.load(open(f))['benchmarks']} for f in files]
def med(n,k):
    v=[r[n][k] for r in runs if k in r[n]]
    return st.median(v) if v else None
def f(x,p=3): return '' if x is None else f"{x:.{p}f}"
print("| benchmark | epoch, best (s) | epoch, mean (s) | waiting in fit (s) | computing in fit (s) | pipeline alone (s) | compute alone (s) | best epoch / max | best epoch / sum |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for n in runs[0]:
    print(f"| `{n}` | {f(med(n,'epoch_min_s'))} | {f(med(n,'epoch_s'))} | {f(med(n,'wait_s'))} | {f(med(n,'compute_s'))} | {f(med(n,'load_alone_s'))} | {f(med(n,'compute_alone_s'))} | {f(med(n,'vs_max'),2)} | {f(med(n,'vs_sum'),2)} |")
print()
for i,r in enumerate(runs):
    best=min(r['augment_p1']['epoch_min_s'], r['augment_p2']['epoch_min_s'])
    print(f"run {i+1}: autotune reaches {best/r['augment_autotune']['epoch_min_s']:.3f} of the best hand-picked speed; gz/cached epoch {r['decode_gz_every_epoch']['epoch_min_s']/r['cached']['epoch_min_s']:.2f}; p1 vs_max {r['augment_p1']['vs_max']:.3f}; autotune said: {r['augment_autotune'].get('label','')}")
