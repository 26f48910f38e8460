#!/usr/bin/env bash
# Stage: the value oracle (tests/values): every route a value can travel
# through dlbridge (a producer's own __dlpack__, versioned and legacy; the
# C exchange table both ways; each step of the host-copy cure; from_buffer;
# pickle protocol 5, in process and through a child process; sharing;
# dlbridge tensors consumed by each framework), over every dtype and
# layout, each result read from its raw memory and compared with the
# producer's own values. A wrong value fails the stage; so does a refusal
# where a route must work.
#
# Runs twice: with Debian's python3 (numpy 1.24, torch 1.13, hypothesis)
# and with the peer environment (scripts/peers-env: numpy 2, torch 2, JAX,
# TensorFlow, Paddle, pyarrow, mlx, onnxruntime, tvm-ffi), whose pins name
# every framework, so one missing fails (DLBRIDGE_PEERS_REQUIRED).
# TensorFlow and Paddle cannot share a process: their files run in
# processes of their own. The package is the build directory's working copy
# (<build>/python), or the installed one when the build has none.
# It prints the outcomes per route (zero-copy, copied, refused, wrong, peer
# faults), and on its last line the route x case checks and their outcomes.
# DLBRIDGE_VALUES_LOGS=DIR keeps the runs' logs and counts;
# DLBRIDGE_VALUES_RECORD=1 writes the counts into
# docs/reliability-figures.json, from which scripts/doc-facts writes
# docs/RELIABILITY.md's table of routes.
#
#   bash scripts/test.d/47-values.sh <build-dir>
# timeout: 600
set -euo pipefail

build=${1:?usage: 47-values.sh <build-dir>}
[ -d "$build" ] || { echo "47-values: no build directory '$build'" >&2; exit 2; }
[ -f tests/values/oracle.py ] || { echo "47-values: run from the repository root" >&2; exit 2; }
pkg=$(cd "$build" && pwd)/python
if [ -f "$pkg/dlbridge/__init__.py" ]; then
  export PYTHONPATH=$pkg
else
  echo "47-values: $pkg/dlbridge is missing: testing the installed package"
fi

set +e
env_dir=$(scripts/peers-env | tail -n 1)
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "47-values: FAILED: no peer environment (scripts/peers-env exit $rc), although python/requirements/peers.txt pins its frameworks" >&2; exit 1; }
peers=$env_dir/bin/python

if [ -n "${DLBRIDGE_VALUES_LOGS:-}" ]; then
  tmp=$DLBRIDGE_VALUES_LOGS
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlbridge-values.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
fi
export PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=3 JAX_PLATFORMS=cpu OMP_NUM_THREADS=1

# run NAME PYTHON REQUIRED PYTEST-ARGS...: one pytest process, in the background
run() {
  local name=$1 python=$2 required=$3
  shift 3
  DLBRIDGE_PEERS_REQUIRED=$required DLBRIDGE_VALUES_COUNTS=$tmp/$name.json \
    "$python" -m pytest -q -p no:cacheprovider -rs "$@" >"$tmp/$name.log" 2>&1 &
  pids+=("$!:$name")
}

fail=0
wait_all() {
  local entry
  for entry in "${pids[@]}"; do
    if ! wait "${entry%%:*}"; then
      fail=1
      echo "== 47-values: ${entry#*:}: FAILED"
      grep -E '^(  [^ ].*(WRONG|must work|cannot be read)|FAILED|ERROR|E  )' "$tmp/${entry#*:}.log" | head -n 60 || true
      tail -n 5 "$tmp/${entry#*:}.log"
    else
      echo "== 47-values: ${entry#*:}: $(tail -n 1 "$tmp/${entry#*:}.log")"
    fi
  done
  pids=()
}

others=(--ignore=tests/values/test_tensorflow.py --ignore=tests/values/test_paddle.py)
pids=()
run debian /usr/bin/python3 "" tests/values
run peers "$peers" 1 tests/values "${others[@]}"
wait_all
run peers-tensorflow "$peers" 1 tests/values/test_tensorflow.py
run peers-paddle "$peers" 1 tests/values/test_paddle.py
wait_all

/usr/bin/python3 - "$tmp" "${DLBRIDGE_VALUES_RECORD:-}" <<'PY'
import collections, json, os, re, sys

tmp, record = sys.argv[1], sys.argv[2]
envs = collections.OrderedDict([("Debian", ["debian"]), ("peers", ["peers", "peers-tensorflow", "peers-paddle"])])
OUTCOMES = ["zero-copy", "copied", "refused", "wrong", "peer-fault"]


def route_of(key):
    """The route of a tally key, one row per way a value travels: the
    producer's name and the case are left out (a chained route keeps its own
    name, not the one it was reached by; every lie one row per entry)."""
    route = key.rsplit("|", 1)[0].split(" <- ")[0]
    route = re.sub(r"^liar \(.*?\) -> ", "lying capsule -> ", route)
    route = re.sub(r"^__dlpack_device__ \(.*?\) -> ", "__dlpack_device__ disagrees -> ", route)
    return route


total = collections.Counter()
routes = collections.defaultdict(collections.Counter)
parts, checks = [], {}
for env, names in envs.items():
    c = collections.Counter()
    for name in names:
        path = os.path.join(tmp, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                counts = json.load(f)
            c.update(counts["outcomes"])
            for key, n in counts["by_route"].items():
                outcome = key.rsplit("|", 1)[1]
                if outcome != "n/a":
                    routes[route_of(key)][outcome] += n
    c.pop("n/a", None)
    total.update(c)
    checks[env] = sum(c.values())
    print("  %s: %d checks: zero-copy %d, copied %d, refused %d, wrong %d, peer faults %d"
          % (env, sum(c.values()), c["zero-copy"], c["copied"], c["refused"], c["wrong"], c["peer-fault"]))
    parts.append("%s %d" % (env, sum(c.values())))
print("  per route (both environments): zero-copy / copied / refused / wrong / peer faults")
for route in sorted(routes):
    r = routes[route]
    print("    %-48s %7d %7d %7d %5d %5d" % (route[:48], *(r[o] for o in OUTCOMES)))
print("47-values: %d route x case checks (%s): zero-copy %d, copied %d, refused %d, wrong %d"
      % (sum(total.values()), ", ".join(parts), total["zero-copy"], total["copied"], total["refused"], total["wrong"]))
if record:
    # docs/reliability-figures.json "values": what scripts/doc-facts writes
    # into docs/RELIABILITY.md (DLBRIDGE_VALUES_RECORD=1, on demand)
    path = os.path.join("docs", "reliability-figures.json")
    with open(path) as f:
        figures = json.load(f)
    figures["values"] = {"checks": checks, "outcomes": {o: total[o] for o in OUTCOMES},
                         "routes": {route: {o: routes[route][o] for o in OUTCOMES} for route in sorted(routes)}}
    with open(path, "w") as f:
        json.dump(figures, f, indent=2)
        f.write("\n")
    print("47-values: the counts are recorded in %s (run scripts/doc-facts <build>)" % path)
PY
exit $fail
