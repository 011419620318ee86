#!/bin/bash
# (Not yet run.) Lease FT: the GPU tests of the forty-fifth session's build (README's GPU test
# binary, .device/gpu_test), alone: every operator kernel against the CPU (now also two layers
# of Llama-2-13B, SmolLM-135M and a 3,200-wide model), the page-math probe (now also 576 and
# 3,200 columns), attention alone, the device watchdog, and every layer's values after a step
# on graph, pdl, persistent and persistent with attention inside the O-projection, which names
# the first value off the CPU reference where one is wrong. Any card. ~5 min: call with timeout
# ~570. Also .device/: gpu_test.
LIMIT=520 ARCHIVE=ft.tgz
source tools/leases/common.sh
GT=500 gpu_tests
grep -E "worst layer value|FAILED|panicked|off the" $W/gpu_test.log | head -12
