#!/usr/bin/env bash
# The write() fast path where credentials change, in the guest: writepath.c
# after fork() and after setresuid(), as (a) rdma-core, (b) relinked,
# (c) preloaded; identical lines required. The kernel's one-time log line
# for a refused write() ("changed security contexts") must not appear after
# the fork runs: rsverbs switches a forked child to INVOKE_WRITE before its
# first call (src/uverbs/route.rs, pthread_atfork). docs/write-path.md.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
DEV=${WRITEPATH_DEV:-rxe1}
LOGLINE='changed security contexts after opening file descriptor'

run() { # PHASE LABEL CMD...
  local phase=$1 label=$2; shift 2
  local bin=$BIN/writepath; [ "$label" = relinked ] && bin=$BIN/writepath.rsv
  if ! timeout 120 "$@" "$bin" "$phase" $DEV > "$W/$phase.$label" 2> "$W/$phase.$label.err"; then
    fail "$phase $label: exited non-zero:"; cat "$W/$phase.$label.err" >&2
  fi
}
compare() { # PHASE
  local n; n=$(grep -c ' ret=' "$W/$1.reference")
  check "$1 reference: every call ran (18 or more lines)" [ "$n" -ge 18 ]
  for m in relinked preload; do
    check "$1 $m: served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1' "$W/$1.$m.err"
    while IFS=$'\t' read -r a b; do
      if [ "$a" = "$b" ]; then pass "$1 $m same as rdma-core: $a"; else fail "$1 $m: rdma-core '$a' vs rsverbs '$b'"; fi
    done < <(paste "$W/$1.reference" "$W/$1.$m")
  done
}

before=$(dmesg | grep -c "$LOGLINE")
for label in reference relinked preload; do
  case $label in preload) run fork $label env LD_PRELOAD="$RSVERBS_LIB" ;; *) run fork $label ;; esac
done
compare fork
after=$(dmesg | grep -c "$LOGLINE")
check "fork: no refused write() in the kernel log (before $before, after $after)" [ "$after" = "$before" ]
# strace of one relinked fork run: the parent's steady state writes, the
# child's calls are ioctls (INVOKE_WRITE), and no write() is refused.
strace -f -qq -e trace=write,ioctl -o "$W/fork.strace" "$BIN/writepath.rsv" fork $DEV > /dev/null 2>&1
check "fork strace: no EACCES" sh -c "! grep -q EACCES '$W/fork.strace'"
check "fork strace: the parent's calls are 32-byte write()s" grep -qE '^[0-9]+ +write\([0-9]+, .*, 32\) += 32$' "$W/fork.strace"

for label in reference relinked preload; do
  case $label in preload) run setuid $label env LD_PRELOAD="$RSVERBS_LIB" ;; *) run setuid $label ;; esac
done
compare setuid
echo "writepath: kernel log lines for refused writes: $(dmesg | grep -c "$LOGLINE") (at most one per boot: pr_err_once)"
mkdir -p "$RESULTS_DIR/writepath" && cp "$W"/* "$RESULTS_DIR/writepath/"
rm -rf "$W"
finish
