#!/usr/bin/env bash
# make matrix: the real-kernel suites in every (userland, kernel) cell, one
# cell after another (one guest at a time: TCG wants both cores).
#   RSVERBS_MATRIX_CELLS="bullseye:bullseye sid:sid"   USERLAND:KERNEL cells
#                       "bookworm:bookworm:s390x"       USERLAND:KERNEL:ARCH, another
#                                                       architecture (docs/architectures.md)
#   RSVERBS_MATRIX_SUITES="conform e2e diffrand compat" the suites
#   RSVERBS_MATRIX_PREPARE_ONLY=1  each cell's kernel, userland and test
#                       programs, no boot (cached for the run that boots)
# A progress line per cell, a results table in ctest/out/matrix/summary.md
# (each cell's output in ctest/out/matrix/USERLAND-KERNEL/), and the last
# line "N passed, N failed" over all cells.  Exits 1 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
CELLS=${RSVERBS_MATRIX_CELLS:-bullseye:bullseye bookworm:bookworm bookworm:bookworm-backports trixie:trixie sid:sid sid:bullseye bullseye:sid}
SUITES=${RSVERBS_MATRIX_SUITES:-conform e2e diffrand compat}
M=$PWD/ctest/out/matrix
# The kernel of siw's second boot, for cells whose kernel siw.ko cannot be
# built for here (testbed/siw.sh: the host's gcc; bookworm's on Debian 12).
SIW_KERNEL=${RSVERBS_SIW_KERNEL:-bookworm}
# diffrand: 3 seeds (ctest/regress/diffrand.seeds and a random one), each on
# the ioctl route and both fallback routes: 3 x (2500 + 2 x 1000) = 13,500
# operations compared per cell.
MIN_DIFFRAND_OPS=10000
export DIFFRAND_OPS=${DIFFRAND_OPS:-2500} DIFFRAND_FALLBACK_OPS=${DIFFRAND_FALLBACK_OPS:-1000}
# conform's fallback modes with the preloaded program only (the relinked one
# runs the same code there; make check runs both: ctest/vm/conform.sh).
export CONFORM_FALLBACK_LINKS=${CONFORM_FALLBACK_LINKS:-preload}

# Per kernel: timeouts for one diffrand run, one compat program, the whole
# boot.  Measured (testbed/README.md, the matrix's timings): on 7.2 under TCG
# conform takes several times longer than on 5.10-6.12 (attaching thousands
# of groups is slow there); the rest takes about as long as on 6.1, so only
# the boot's timeout grows.
knobs() { # KERNEL-SUITE
  case $1 in
    sid) DIFFRAND_TIMEOUT=300 COMPAT_TIMEOUT=120 VM_TIMEOUT=3600 ;;
    *) DIFFRAND_TIMEOUT=300 COMPAT_TIMEOUT=120 VM_TIMEOUT=1800 ;;
  esac
}

# Never two guests at once: wait for any running one (make check, another
# checkout) to finish.
wait_for_guests() {
  local said=0
  while pgrep -f qemu-system >/dev/null; do
    [ $said = 1 ] || echo "matrix: waiting for a running qemu guest to finish (pgrep -f qemu-system)"
    said=1
    sleep 10
  done
}

# count DIR SUITE PASS|FAIL
count() { local c; c=$(grep -c "^$3" "$1/$2.results" 2>/dev/null); echo "${c:-0}"; }
# failures DIR: every FAIL line of the cell, "FAIL suite: ..."
failures() {
  local r
  for r in "$1"/*.results; do
    [ -e "$r" ] && sed -n "s/^FAIL /FAIL $(basename "$r" .results): /p" "$r"
  done
  cat "$1/matrix-failures" 2>/dev/null
}

mkdir -p "$M"
rm -f "$M"/summary.md "$M"/*.row
total_p=0 total_f=0 n=0 ncells=$(wc -w <<< "$CELLS") T0=$(date +%s)
echo "matrix: $ncells cells, suites: $SUITES"
# cell_dir CELL: its results directory, USERLAND-KERNEL[-ARCH].
cell_dir() { echo "$M/${1//:/-}"; }
for cell in $CELLS; do
  n=$((n + 1))
  IFS=: read -r u k a <<< "$cell"
  d=$(cell_dir "$cell")
  rm -rf "$d" && mkdir -p "$d"
  knobs "$k"
  export RSVERBS_KERNEL=$k RSVERBS_USERLAND=$u RSVERBS_ARCH=${a:-$(dpkg --print-architecture)}
  # Another architecture under TCG: every instruction is translated, not
  # only the kernel's (the guest's whole userland): a longer boot budget.
  [ -z "$a" ] || VM_TIMEOUT=$((VM_TIMEOUT * 2))
  # Per cell, on top of SUITES: devloss where the userland is rdma-core 33
  # (its RDMAV_ALLOW_DISASSOC_DESTROY parse, docs/rdma-core-releases.md D1);
  # siw0, a provider without a multicast op, in every amd64 cell. What
  # differs between cells there is the userland's side, rdma-core's dummy
  # op (libibverbs/dummy_ops.c): rsverbs makes no system call. testbed/siw.sh
  # builds siw.ko only for kernels the host's gcc built (bookworm's and
  # bookworm-backports' on Debian 12); for another kernel, siw runs in a
  # second boot of the cell's userland on bookworm's kernel ($SIW_KERNEL).
  cell_suites=$SUITES RSVERBS_SIW=0 siw_boot=""
  if [ "${RSVERBS_MATRIX_EXTRAS:-1}" = 1 ]; then
    [ "$u" = bullseye ] && cell_suites="$cell_suites devloss"
    [ -z "$a" ] && cell_suites="$cell_suites siw" RSVERBS_SIW=1
    # stack in another architecture's cell: its frames are its ABI's (s390x
    # keeps a 160-byte register save area in each), and its budget its own
    # (ctest/vm/stack.sh, docs/security.md).
    [ -n "$a" ] && cell_suites="$cell_suites stack"
    # selftest in every cell: the command linked against the cell's C
    # library and rdma-core (ctest/build.sh tool_for_root) must find every
    # answer rdma-core's there, old rdma-core and big-endian included.
    cell_suites="$cell_suites selftest"
  fi
  export RSVERBS_SIW
  t0=$(date +%s)
  # 1. kernel and userland (download, unpack, debootstrap: cached)
  prc=0
  testbed/vm.sh prepare > "$d/prepare.log" 2>&1 || prc=$?
  if [ $prc -ne 0 ] && [ "$RSVERBS_SIW" = 1 ] && grep -q 'no siw for it here' "$d/prepare.log"; then
    RSVERBS_SIW=0 siw_boot=$SIW_KERNEL prc=0
    testbed/vm.sh prepare >> "$d/prepare.log" 2>&1 || prc=$?
    [ $prc -ne 0 ] || RSVERBS_KERNEL=$siw_boot RSVERBS_SIW=1 testbed/vm.sh prepare >> "$d/prepare.log" 2>&1 || prc=$?
  fi
  boot_suites=$cell_suites
  [ -z "$siw_boot" ] || boot_suites=${cell_suites/ siw/}
  t1=$(date +%s)
  # 2. the test programs, in and for the userland
  brc=0
  [ $prc -eq 0 ] && { ctest/build.sh > "$d/build.log" 2>&1 || brc=$?; }
  t2=$(date +%s)
  if [ "${RSVERBS_MATRIX_PREPARE_ONLY:-0}" = 1 ]; then
    [ -z "$a" ] || k="$k ($a)"
    printf 'matrix: [%d/%d] userland %-8s kernel %-18s prepared in %d s (prepare %d s, build %d s), no boot%s\n' \
      "$n" "$ncells" "$u" "$k" $((t2 - t0)) $((t1 - t0)) $((t2 - t1)) \
      "$([ $prc -eq 0 ] && [ $brc -eq 0 ] || echo " -- FAILED: prepare $prc, build $brc (logs in $d)")"
    [ $prc -eq 0 ] && [ $brc -eq 0 ] || prepare_failed=1
    continue
  fi
  # 3. one boot, the suites
  rc=0
  if [ $prc -eq 0 ] && [ $brc -eq 0 ]; then
    wait_for_guests
    t2=$(date +%s)
    RSVERBS_SUITES=$boot_suites RSVERBS_VM_OUT=$d RSVERBS_VM_TIMEOUT=$VM_TIMEOUT \
      DIFFRAND_TIMEOUT=$DIFFRAND_TIMEOUT COMPAT_TIMEOUT=$COMPAT_TIMEOUT \
      ctest/vm_suite.sh > "$d/console.log" 2>&1 || rc=$?
    if [ -n "$siw_boot" ]; then
      RSVERBS_KERNEL=$siw_boot RSVERBS_SIW=1 RSVERBS_SUITES=siw RSVERBS_VM_OUT=$d/siw-boot \
        ctest/vm_suite.sh > "$d/console-siw.log" 2>&1 || rc=$?
      cp "$d/siw-boot/siw.results" "$d/" 2>/dev/null
    fi
  fi
  t3=$(date +%s)

  p=0 f=0 per="" notes=""
  for s in $cell_suites; do
    sp=$(count "$d" "$s" PASS) sf=$(count "$d" "$s" FAIL)
    if [ ! -e "$d/$s.results" ]; then
      sf=1 notes="$notes $s: no results;"
      echo "FAIL $s produced no results in this cell" >> "$d/matrix-failures"
    fi
    lbl=$s
    if [ "$s" = siw ] && [ -n "$siw_boot" ]; then lbl="siw(on $siw_boot)"; fi
    p=$((p + sp)) f=$((f + sf)) per="$per $lbl $sp/$sf"
  done
  if [ $prc -ne 0 ]; then notes="$notes prepare failed ($prc);"; fi
  if [ $brc -ne 0 ]; then notes="$notes build failed ($brc);"; fi
  if [ $rc -ne 0 ] && [ $f -eq 0 ]; then
    f=1 notes="$notes guest suite exited $rc;"
    echo "FAIL the guest suite exited with status $rc and no FAIL line" >> "$d/matrix-failures"
  fi
  ops=$(sed -n 's/^diffrand: \([0-9]*\) ops compared.*/\1/p' "$d/console.log" 2>/dev/null | tail -1)
  if [[ " $SUITES " == *" diffrand "* ]] && [ "${ops:-0}" -lt $MIN_DIFFRAND_OPS ]; then
    f=$((f + 1)) notes="$notes diffrand compared ${ops:-0} < $MIN_DIFFRAND_OPS ops;"
    echo "FAIL diffrand compared only ${ops:-0} operations (< $MIN_DIFFRAND_OPS)" >> "$d/matrix-failures"
  fi
  guest=$(sed -n 's/^=== guest: //p' "$d/console.log" 2>/dev/null | head -1)
  # (up to vm.sh's failure report, which repeats the serial log's tail)
  suites_s=$(awk '/^testbed: ---- last/ { exit } /^=== suite [a-z_0-9]* done in [0-9]* s$/ { t += $(NF - 1) }
    END { print t + 0 }' "$d/console.log" 2>/dev/null)
  run_s=$((t3 - t2))
  total_p=$((total_p + p)) total_f=$((total_f + f))
  [ -z "$a" ] || k="$k ($a)"
  printf 'matrix: [%d/%d] userland %-8s kernel %-18s %s: %d passed, %d failed in %d s (prepare %d s, build %d s, boot+suites %d s)%s\n' \
    "$n" "$ncells" "$u" "$k" "$cell_suites" "$p" "$f" $((t3 - t0)) $((t1 - t0)) $((t2 - t1)) "$run_s" \
    "${notes:+ --$notes}"
  printf '| %s | %s | %s | %s | %d | %d | %s | %d | %d | %d | %d | %s |\n' "$u" "$k" "${guest:-?}" "${per# }" "$p" "$f" \
    "${ops:-}" $((t1 - t0)) $((t2 - t1)) $((run_s - suites_s)) "$suites_s" \
    "$([ "$f" -eq 0 ] && echo ok || echo "FAIL lines below;$notes")" > "$d/row"
done

# RSVERBS_MATRIX_PREPARE_ONLY=1: the cells' downloads, userlands and test
# programs only (.ci/run, while make check's guest runs); no table.
if [ "${RSVERBS_MATRIX_PREPARE_ONLY:-0}" = 1 ]; then
  exit "${prepare_failed:-0}"
fi
{
  echo "# rsverbs test matrix"
  echo
  echo "$(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (modified tree)'), suites: $SUITES;" \
    "diffrand: DIFFRAND_OPS=$DIFFRAND_OPS DIFFRAND_FALLBACK_OPS=$DIFFRAND_FALLBACK_OPS; $(( $(date +%s) - T0 )) s in all."
  echo "Times in seconds: prepare = kernel download/unpack + debootstrap (0 when cached), build = test programs,"
  echo "boot = guest run minus the suites. Per-suite counts are passed/failed."
  echo
  echo "| userland | kernel | guest | suites | passed | failed | diffrand ops | prepare | build | boot | suites time | notes |"
  echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
  for cell in $CELLS; do cat "$(cell_dir "$cell")/row"; done
  echo
  echo "## Failures"
  for cell in $CELLS; do
    d=$(cell_dir "$cell")
    fl=$(failures "$d")
    [ -n "$fl" ] || continue
    echo
    IFS=: read -r u k a <<< "$cell"
    echo "### $u userland, $k kernel${a:+, $a} ($(wc -l <<< "$fl") lines)"
    echo
    echo '```'
    head -200 <<< "$fl"
    echo '```'
  done
} > "$M/summary.md"
echo "matrix: table in ctest/out/matrix/summary.md"
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
