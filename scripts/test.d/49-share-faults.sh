#!/usr/bin/env bash
# Stage: sharing under faults and hostile peers (tests/share/share_faults.py,
# the counts in its LOOPS): a sender shrinking and sealing files under its
# receiver (SIGBUS race), receivers and issuers killed with SIGKILL, Pools
# terminated mid-task (fork and spawn), Pool(maxtasksperchild=1) rounds
# that must deliver every result, tickets nobody opens, replayed and forged
# tickets, and a throwaway user (made here with useradd, removed after)
# that must get nothing. Each case runs in its own process under its own
# time limit and prints its figures (file descriptors, memory-file maps,
# mappings, exports, held tickets, RSS and shared memory, before -> after);
# a growth, a signal or a hang fails it.
# timeout: 240
#
#   bash scripts/test.d/49-share-faults.sh <build-dir>
set -uo pipefail

build=${1:?usage: 49-share-faults.sh <build-dir>}
[ -d "$build" ] || { echo "49-share-faults: no build directory '$build'" >&2; exit 2; }
[ -f tests/share/share_faults.py ] || { echo "49-share-faults: run from the repository root" >&2; exit 2; }
pkg=$(cd "$build/python" && pwd)
[ -e "$pkg/dlbridge/__init__.py" ] || { echo "49-share-faults: no built package in $pkg" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c "import numpy" >/dev/null 2>&1 || { echo "49-share-faults: $py cannot import numpy" >&2; exit 1; }

user=""
cleanup() { [ -n "$user" ] && userdel "$user" >/dev/null 2>&1; }
trap cleanup EXIT
if [ "$(id -u)" = 0 ]; then
  user=dlbfault$$
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" ||
    { echo "49-share-faults: useradd $user failed" >&2; user=""; exit 1; }
fi

echo "== 49-share-faults: tests/share/share_faults.py (package: $pkg/dlbridge)"
start=$SECONDS
passed=0
failed=0
skipped=0
# case and its time limit in seconds
for entry in sigbus:50 kill-receivers:40 kill-issuers:40 pool-terminate-fork:40 pool-terminate-spawn:60 \
             maxtasks-fork:40 maxtasks-spawn:60 unopened:40 forged:40 another-user:40; do
  case_=${entry%%:*}
  limit=${entry##*:}
  t0=$SECONDS
  # Past its limit a case gets SIGABRT, on which Python's faulthandler
  # prints every thread's stack: a hang names where it waited.
  PYTHONFAULTHANDLER=1 PYTHONPATH=$pkg DLB_FAULT_USER=$user timeout -s ABRT --kill-after=5 "$limit" \
    "$py" tests/share/share_faults.py "$case_"
  rc=$?
  case $rc in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    124|137) echo "$case_: FAIL: hung (past its $limit s; the stacks above)"; failed=$((failed + 1)) ;;
    *) [ $rc -gt 128 ] && echo "$case_: FAIL: died of signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
       failed=$((failed + 1)) ;;
  esac
  echo "   ($case_: $((SECONDS - t0)) s)"
done
summary="49-share-faults: $passed cases held, $failed failed, $skipped skipped, in $((SECONDS - start)) s"
if [ $failed -gt 0 ]; then
  echo "$summary"
  exit 1
fi
if [ $skipped -gt 0 ]; then
  echo "$summary (another-user needs root)"
  exit 77
fi
echo "$summary"
