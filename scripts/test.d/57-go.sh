#!/usr/bin/env bash
# Stage: the Go binding (bindings/go) against the freshly built library:
# gofmt, go vet, go test -race (the native library of tests/lang plays the
# native side; two tests hand tensors to and from a Python process by
# ticket); the guide's examples run in the docs stage (scripts/doc-examples,
# with this toolchain). The toolchain is the package
# index's Go (scripts/go-env, cached); where it cannot be installed the
# stage is a skip (a failure under CI=true). Offline: GOTOOLCHAIN=local,
# GOPROXY=off. About 20 s with the toolchain and Go's build cache warm;
# the first run on a machine also compiles the standard library for the
# race detector (a minute or two).
#
#   bash scripts/test.d/57-go.sh <build-dir>
# timeout: 600
set -euo pipefail

build=${1:?usage: 57-go.sh <build-dir>}
[ -d "$build" ] || { echo "57-go: no build directory '$build'" >&2; exit 2; }
root=$(pwd)
[ -f "$root/bindings/go/go.mod" ] || { echo "57-go: run from the repository root" >&2; exit 2; }
build=$(cd "$build" && pwd)
for f in src/libdlbridge.so tests/lang/libnative_library.so meson-uninstalled/dlbridge-uninstalled.pc python/dlbridge; do
  [ -e "$build/$f" ] || { echo "57-go: $build/$f is missing (build the tests and the Python package)" >&2; exit 1; }
done

if ! goroot=$(bash "$root/scripts/go-env" | tail -n 1); then
  if [ "${CI:-}" = "true" ]; then
    echo "57-go: no Go toolchain (scripts/go-env failed), and CI needs one" >&2
    exit 1
  fi
  echo "57-go: skipped: no Go toolchain (scripts/go-env failed)"
  exit 77
fi
export PATH=$goroot/bin:$PATH
export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod CGO_ENABLED=1
export PKG_CONFIG_PATH=$build/meson-uninstalled
export LD_LIBRARY_PATH=$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export DLB_TEST_NATIVE_LIBRARY=$build/tests/lang/libnative_library.so
export DLB_TEST_PYTHONPATH=$build/python
echo "== 57-go: $(go version), library $build/src"

cd "$root/bindings/go"
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "57-go: not gofmt-formatted: $unformatted" >&2; exit 1; }
echo "== 57-go: go vet ./..."
go vet ./...
echo "== 57-go: go test -race ./..."
go test -race -count=1 ./...

echo "57-go: OK"
