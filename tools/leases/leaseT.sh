#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease T: activation words without spills (5c065f7's host, its kernel with the `l1` reads,
# load_x's words fetched in halves and the staging's partials one at a time: 250 registers,
# no spill) against the counters (6e99db2), alternating. docs/perf.md "Words without spills".
#   .device/mkc_words: the release binary of 5c065f7; .device/mkc_base: of 6e99db2.
#   .device/v_ns_b1.cu: see perf.md (built by hand from 5c065f7's mkc.cu and words.py l1);
#   .device/ns_b1.ron: Tuning(kernels_cu: Some(".device/v_ns_b1.cu"))
LIMIT=120 ARCHIVE=t.tgz
source tools/leases/common.sh
M=.device/mkc_base b counters_a
M=.device/mkc_words b words_ns_a --tune .device/ns_b1.ron
M=.device/mkc_base b counters_b
M=.device/mkc_words b words_ns_b --tune .device/ns_b1.ron
