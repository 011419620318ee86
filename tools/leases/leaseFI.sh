#!/bin/bash
# (Not yet run.) Lease FI: OpenLLaMA-3B's pages filled (branch page-bytes-128: the kernels'
# check takes pages of any multiple of 128 bytes from 8192; main refuses 12,800). Its 3,200-column rows fit two to a
# 16 KiB page (78% full; down 53%), and lease FG measured it at 1.31x its floor (pdl) where the
# model says 1.14x. Pages of 12,800 bytes hold the same two rows with nothing spare, so the
# persistent ring gets more slots in the same shared memory. `mkc bench` of the file `mkc
# model` writes against the same file with `page_bytes: 12800`, persistent and pdl, alternated
# twice, every run checked against the CPU reference. Predicted (h200 profile at 4,570 GB/s):
# persistent 1,982.5 -> 1,942.5 µs, pdl 1,690.4 -> 1,690.8 (its grids' rings are per CTA and
# its pages unchanged); every run's check passes (the copies move a page's weight bytes, the
# slot only sets the stride). Any card. ~4 min on an H200: call with timeout ~330. Also
# .device/: mkc_pages, the branch's release binary (git worktree add /tmp/pb page-bytes-128;
# cargo build --release there; copy and strip target/release/mkc).
LIMIT=260 ARCHIVE=fi.tgz
source tools/leases/common.sh
M=.device/mkc_pages
$M model tests/configs/openllama-3b -o $W/ol.ron || exit 1
sed 's/page_bytes: 16384/page_bytes: 12800/' $W/ol.ron > $W/ol128.ron
grep -q "page_bytes: 12800" $W/ol128.ron || { echo "no page_bytes to change"; exit 1; }
export TARGETS=persistent,pdl BT=150
T=$W/ol.ron b ol16k_a
T=$W/ol128.ron b ol128_a
T=$W/ol.ron b ol16k_b
T=$W/ol128.ron b ol128_b
