#!/usr/bin/env bash
# What else is running on this machine that would slow a timed run: qemu
# guests (qemu-system-*), qemu-user programs, and builds (cargo, rustc, the
# C compiler and linkers, zig, make, dpkg-buildpackage, debootstrap, apt).
# .ci/run prints it at its start, since its times are comparable with an
# idle machine's only when nothing else runs.
#   ctest/busy.sh [PID]   leaves out PID (default: the caller, $PPID), its
#                         ancestors and its descendants, and this script's
#                         own processes
# Prints the load average, the CPUs, then one line per process found; the
# last line is "busy: N other processes" (N = 0: idle). Exits 0 either way.
set -euo pipefail
self=${1:-$PPID}
ps_out=$(ps -eo pid=,ppid=,args= 2>/dev/null) || ps_out=
# The processes to leave out: self, its ancestors, every descendant of self
# and of this script (ps and awk among them).
awk -v self="$self" -v me="$$" -v cpus="$(nproc)" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
  { pid = $1; ppid[pid] = $2; $1 = $2 = ""; sub(/^ +/, ""); args[pid] = $0; order[++n] = pid }
  function under(p, root,   i) { for (i = 0; p != "" && p > 0 && i < 64; i++) { if (p == root) return 1; p = ppid[p] } return 0 }
  function ancestor(p,   q, i) { q = self; for (i = 0; q != "" && q > 0 && i < 64; i++) { if (q == p) return 1; q = ppid[q] } return 0 }
  function kind(a,   b) {
    b = a; sub(/ .*/, "", b); sub(/.*\//, "", b)
    if (b ~ /^qemu-system-/) return "qemu guest"
    if (b ~ /^qemu-[a-z0-9_]+(-static)?$/) return "qemu-user"
    if (b ~ /^(cargo|rustc|rustdoc|clippy-driver|cc1|cc1plus|ld|ld\.bfd|ld\.gold|ld\.lld|lld|zig|make|gmake|dpkg-buildpackage|debootstrap|apt-get|apt|dpkg)$/) return "build"
    if (b ~ /^([a-z0-9_]+-linux-gnu-)?(gcc|g\+\+|cc|c\+\+|as)(-[0-9]+)?$/) return "build"
    return ""
  }
  END {
    printf "busy: load average %s on %d CPUs\n", load, cpus
    for (i = 1; i <= n; i++) {
      p = order[i]; k = kind(args[p])
      if (k == "" || under(p, self) || under(p, me) || ancestor(p)) continue
      c[k]++; found++
      printf "busy: %s: %s %s\n", k, p, substr(args[p], 1, 160)
    }
    printf "busy: %d other processes (%d qemu guests, %d qemu-user, %d builds)\n", found, c["qemu guest"], c["qemu-user"], c["build"]
  }
' <<<"$ps_out"
