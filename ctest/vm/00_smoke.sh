#!/usr/bin/env bash
# The test bed itself: both Soft-RoCE devices up with their GIDs.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
check "test bed smoke (rxe0 on lo, rxe1 on dummy0, uverbs0/1, GIDs)" timeout 120 "$(dirname "$0")/../../testbed/smoke.sh"
finish
