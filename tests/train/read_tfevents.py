#!/usr/bin/env python3
"""Reads TensorBoard event files with tensorboard's own reader: read_tfevents.py RUN_DIR.

Prints one line per scalar, "tag step value" (value in repr form), and one per histogram,
"tag step num min max bucket_count_sum", as EventAccumulator loads them from the newest event
file of RUN_DIR. Used by tests/train/test_callbacks_keras.cpp to check ctnn's tensorboard
callback. Exit code 3 when tensorboard cannot be imported (the C++ test then reports itself
skipped); tensorboard is not a dependency of ctnn (pip install tensorboard).
"""
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:  # the C++ test turns this into CTNN_SKIP
    print(f"missing: {e}", file=sys.stderr)
    sys.exit(3)

acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0,
                                                                       event_accumulator.HISTOGRAMS: 0})
acc.Reload()
tags = acc.Tags()
for tag in sorted(tags.get("scalars", [])):
    for e in acc.Scalars(tag):
        print(tag, e.step, repr(e.value))
for tag in sorted(tags.get("histograms", [])):
    for e in acc.Histograms(tag):
        h = e.histogram_value
        print(tag, e.step, int(h.num), repr(h.min), repr(h.max), int(sum(h.bucket)))
