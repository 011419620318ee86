#!/bin/bash
# (Not yet run: prepared when the session's device time was spent.)
# Lease AR (any card): lease AQ's cap 4 again, and cap 3, against main, alternating, two
# rounds each (persistent and pdl). Files: .device/v_cap3.cu, .device/v_cap4.cu, .device/cap3.ron,
# .device/cap4.ron.
LIMIT=200 ARCHIVE=ar.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_c; b cap4_c --tune .device/cap4.ron; b cap3_c --tune .device/cap3.ron
b main_d; b cap4_d --tune .device/cap4.ron; b cap3_d --tune .device/cap3.ron
