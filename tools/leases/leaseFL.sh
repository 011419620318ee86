#!/bin/bash
# (Not yet run.) Lease FL: the 70B Llamas' shape on the GPU (forty-eighth session: `mkc model`
# now lowers Llama-3-70B, -2-70B and CodeLlama-70B with 32 KiB pages on three consumer warps,
# which no lease has run). Two layers of Llama-3-70B's shape (tests/configs/llama-3-70b),
# checked against the CPU reference on every target, then all 80 layers unchecked where the
# card holds them (132.5 GiB: an H200; an H100 refuses it by memory before allocating).
# Predicted at 4,560 GB/s (h200 profile), µs: 2 layers persistent 1,326.8, pdl 1,247.2, graph
# 1,275.8 (floor 1,212.8); 80 layers 34,335.1, 31,656.1, 32,898.4 (floor 30,539.0). On an H100
# at 3,065: 2 layers 1,968.4, 1,848.2, 1,872.8 (floor 1,804.3). Any card; timeout ~300. Also
# .device/: mkc.
LIMIT=${LIMIT:-240} ARCHIVE=fl.tgz
source tools/leases/common.sh
$M model tests/configs/llama-3-70b -o $W/l70.ron || exit 1
sed 's/layers: 80/layers: 2/' $W/l70.ron > $W/l70_2.ron
export TARGETS=persistent,pdl,graph
T=$W/l70_2.ron BT=150 b l70_two
T=$W/l70.ron BT=200 b l70 --no-check
