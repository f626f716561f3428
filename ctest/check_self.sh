#!/usr/bin/env bash
# make check's own machinery, on the host, with stand-in steps and a
# stand-in apt-get (logic tests: nothing here boots a guest or reaches a
# mirror):
#   - the closing line counts a step that failed without writing a FAIL
#     result (make check once closed on "89917 passed, 0 failed"
#     while make exited 2), once, and not again a step that did write one;
#   - testbed/apt.sh's private apt-get update runs one at a time: two
#     forced updates never overlap, and of two updates due at once only the
#     first runs (the second finds the stamp fresh once it holds the lock).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=ctest/lib.sh
source ctest/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the closing line ---------------------------------------------------
mk_step() { # NAME BODY: an executable step script in $tmp/steps
  mkdir -p "$tmp/steps"
  printf '#!/bin/sh\nout=%s\n%s\n' "$tmp/out" "$2" > "$tmp/steps/$1"
  chmod +x "$tmp/steps/$1"
}
mk_step ok.sh 'printf "PASS a\nPASS b\nPASS c\n" > "$out/ok.results"'
mk_step dies.sh 'exit 3'
mk_step guest.sh 'echo "PASS g" > "$out/guest.results"'
mk_step fails.sh 'printf "PASS d\nFAIL e\n" > "$out/fails.results"; exit 1'
# run_check HOST_STEPS GUEST_STEPS: ctest/check.sh on them; sets $last
# (its closing line) and $st (its status).
run_check() {
  rm -rf "$tmp/out"
  mkdir -p "$tmp/out"
  st=0
  # The caller's own make check knobs stay out: .ci/run runs this with
  # RSVERBS_CHECK_ONLY=host (one lane, no closing line), and a developer
  # may have set any of them.
  env -u RSVERBS_CHECK_ONLY -u RSVERBS_CHECK_SERIAL -u RSVERBS_CHECK_PREFETCH -u RSVERBS_CHECK_FULL \
    RSVERBS_CHECK_OUT="$tmp/out" RSVERBS_CHECK_HOST_STEPS="$1" RSVERBS_CHECK_GUEST_STEPS="$2" \
    ctest/check.sh > "$tmp/log" 2>&1 || st=$?
  last=$(tail -n 1 "$tmp/log")
}
s=$tmp/steps
run_check "$s/ok.sh $s/dies.sh" "$s/guest.sh"
check "a step that dies without results is one failure in the closing line ('$last', status $st)" \
  test "$last" = "4 passed, 1 failed" -a "$st" != 0
check "the failed step is named in steps.results" grep -q "^FAIL step $s/dies.sh exited with status 3" "$tmp/out/steps.results"
run_check "$s/ok.sh $s/fails.sh" "$s/guest.sh"
check "a step that wrote its own FAIL is counted by it alone ('$last', status $st)" \
  test "$last" = "5 passed, 1 failed" -a "$st" != 0
run_check "$s/ok.sh" "$s/dies.sh"
check "a guest-lane step that dies without results fails the total too ('$last', status $st)" \
  test "$last" = "3 passed, 1 failed" -a "$st" != 0
run_check "$s/ok.sh" "$s/guest.sh"
check "all steps pass: '4 passed, 0 failed' and status 0 ('$last', status $st)" \
  test "$last" = "4 passed, 0 failed" -a "$st" = 0

# --- the private apt update's lock --------------------------------------
# A stand-in apt-get and apt-cache first on PATH. An update marks itself
# running (mkdir: atomic), records an overlap if another is running, and
# then waits until the other process has shown itself: either waiting for
# the lock (apt.sh says so on stderr) or inside its own update (no lock:
# the overlap is recorded). A 60 s guard ends the wait if neither comes.
mkdir -p "$tmp/bin" "$tmp/cache"
cat > "$tmp/bin/apt-get" <<EOF
#!/bin/bash
[ "\$1" = update ] || [ "\$2" = update ] || exit 0
d=$tmp
echo "start \$\$" >> "\$d/updates"
mkdir "\$d/running" 2>/dev/null || echo "overlap \$\$" >> "\$d/updates"
if [ -e "\$d/pair" ]; then
  for _ in \$(seq 600); do
    grep -q 'waiting for another' "\$d/err".* 2>/dev/null && break
    [ "\$(grep -c '^start' "\$d/updates")" -ge 2 ] && break
    sleep 0.1
  done
fi
rmdir "\$d/running" 2>/dev/null
echo "end \$\$" >> "\$d/updates"
EOF
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/apt-cache"
chmod +x "$tmp/bin/apt-get" "$tmp/bin/apt-cache"
# two_updates ARG: two processes run apt_private_update ARG at once.
two_updates() {
  rm -f "$tmp"/updates "$tmp"/err.* "$tmp/cache/apt/updated"
  touch "$tmp/pair"
  local i pids=()
  for i in 1 2; do
    PATH=$tmp/bin:$PATH RSVERBS_CACHE=$tmp/cache bash -c '
      set -euo pipefail
      CACHE=$RSVERBS_CACHE
      . testbed/apt.sh
      apt_private_setup
      apt_private_update "$1"' _ "$1" 2> "$tmp/err.$i" &
    pids+=($!)
  done
  st=0
  for i in "${pids[@]}"; do wait "$i" || st=1; done
  rm -f "$tmp/pair"
}
if ! testbed/apt.sh mirror > /dev/null 2>&1; then
  fail "testbed/apt.sh mirror: the host's apt sources serve no bookworm (the lock tests need a configuration)"
else
  two_updates force
  check "two forced private updates at once both succeed" test "$st" = 0
  check "two forced private updates never overlap ($(tr '\n' ' ' < "$tmp/updates"))" \
    test "$(grep -c '^start' "$tmp/updates")" = 2 -a "$(grep -c '^overlap' "$tmp/updates")" = 0
  check "the second waits for the first's lock, and says so" grep -q 'waiting for another' "$tmp"/err.1 "$tmp"/err.2
  two_updates ""
  check "two due private updates at once both succeed" test "$st" = 0
  check "of two due updates only the first runs (the second finds the stamp fresh: $(tr '\n' ' ' < "$tmp/updates"))" \
    test "$(grep -c '^start' "$tmp/updates")" = 1
fi
finish
