#!/usr/bin/env bash
# Stage: the Go binding (bindings/go) against the freshly built library.
#  1. gofmt, go vet, staticcheck (pinned in bindings/go/tools, built from
#     the Go module proxy once and cached by scripts/go-tools), every
#     exported name documented (bindings/go/tools/doccheck), and
#     docs/reference/go-api.md current (scripts/go-api-doc --check);
#  2. go test -race, then go test -asan (the native library of tests/lang
#     plays the native side; two tests hand tensors to and from a Python
#     process by ticket; one reruns itself under MALLOC_PERTURB_ and
#     GODEBUG=clobberfree=1);
#  3. a user's install: the library installed from the build into a
#     temporary prefix (found through its dlbridge.pc), a module proxy of
#     files made from the checkout (scripts/go-proxy), and a consumer module
#     in a temporary folder outside the tree, with no `replace`, that runs
#     docs/go.md's install line as written (`go get ...` through
#     GOPROXY=file://...) and then the guide's complete example, whose
#     output must be the guide's.
# The toolchain is the package index's Go (scripts/go-env, cached; CI
# machines also have a Go 1.26 in PATH, which this stage does not use);
# where it cannot be installed the stage is a skip (a failure under
# CI=true). Offline but for the first build of staticcheck:
# GOTOOLCHAIN=local, GOPROXY=off, and GOPROXY=file://... for the consumer.
# About 25 s with the caches warm; the first run on a machine also builds
# staticcheck (scripts/go-tools: 217 s on the 2-core machine under a heavy
# load) and the standard library for the race detector and ASan: 5.5
# minutes in all, measured so.
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
tools=$(bash "$root/scripts/go-tools" | tail -n 1)
cache=${DLBRIDGE_ENV_CACHE:-/var/cache/dlbridge}
export PATH=$goroot/bin:$PATH
export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod CGO_ENABLED=1 GOMODCACHE=$cache/go-mod
export PKG_CONFIG_PATH=$build/meson-uninstalled
export LD_LIBRARY_PATH=$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export DLB_TEST_NATIVE_LIBRARY=$build/tests/lang/libnative_library.so
export DLB_TEST_PYTHONPATH=$build/python
echo "== 57-go: $(go version), $("$tools/staticcheck" -version), library $build/src"

cd "$root/bindings/go"
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "57-go: not gofmt-formatted: $unformatted" >&2; exit 1; }
echo "== 57-go: go vet ./..., staticcheck ./..., doc comments, docs/reference/go-api.md"
go vet ./...
"$tools/staticcheck" ./...
(cd tools && GOFLAGS=-mod=readonly go run ./doccheck ..)
bash "$root/scripts/go-api-doc" --check
echo "== 57-go: go test -race ./..."
go test -race -count=1 ./...
echo "== 57-go: go test -asan ./... (AddressSanitizer: gcc's libasan)"
go test -asan -count=1 ./...

echo "== 57-go: go get through a module proxy of files, into a consumer outside the tree"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$work/root" --tags devel,runtime >/dev/null
pc=$(find "$work/root" -name dlbridge.pc | head -n 1)
[ -n "$pc" ] || { echo "57-go: meson install wrote no dlbridge.pc" >&2; exit 1; }
pc_prefix=$(sed -n 's/^prefix=//p' "$pc")
sed -i "s|^prefix=.*|prefix=$work/root$pc_prefix|" "$pc"
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir dlbridge)
proxy=$(bash "$root/scripts/go-proxy" "$work/proxy" | tail -n 1)
zip=$(ls "$proxy"/dlbridge.dev/dlbridge/@v/*.zip)

# docs/go.md: the install line (the ```sh block after `<!-- install: go -->`,
# which scripts/doc-examples leaves to this stage) and the complete example
# (the first ```go block) with its output (the first ```text block).
install_line=$(bash "$root/scripts/install-doc-block" go docs/go.md)
case "$install_line" in
  "go get dlbridge.dev/dlbridge@v"*) ;;
  *) echo "57-go: docs/go.md's install block is not one go get line: '$install_line'" >&2; exit 1 ;;
esac
block() { awk -v lang="$1" '
  inside && /^```$/ { exit }
  inside { print }
  $0 == "```" lang { inside = 1 }' "$root/docs/go.md"; }
mkdir -p "$work/consumer"
block go >"$work/consumer/main.go"
block text >"$work/expected"
cd "$work/consumer"
# Only the file proxy; no checksum database for the unpublished module; a
# module cache and installed library of the consumer's own.
env -u LD_LIBRARY_PATH -u GOSUMDB GOPROXY="file://$proxy" GONOSUMDB=dlbridge.dev GOMODCACHE="$work/modcache" \
    PKG_CONFIG_PATH="$(dirname "$pc")" bash -euo pipefail -c '
  go mod init example.com/consumer 2>/dev/null
  start=$(date +%s.%N)
  '"$install_line"'
  end=$(date +%s.%N)
  echo "57-go: go get took $(awk -v a="$start" -v b="$end" "BEGIN {printf \"%.2f\", b - a}") s"
  ! grep -q "^replace" go.mod
  grep -q "dlbridge.dev/dlbridge v" go.mod
  grep -q "^dlbridge.dev/dlbridge v.* h1:" go.sum
  go build -o consumer .'
echo "57-go: $(basename "$zip"): $(stat -c %s "$zip") bytes; consumer go.mod:"
sed 's/^/  /' go.mod
LD_LIBRARY_PATH=$libdir ./consumer >"$work/got"
if ! diff -u "$work/expected" "$work/got"; then
  echo "57-go: the consumer's output differs from docs/go.md's" >&2
  exit 1
fi
LD_LIBRARY_PATH=$libdir ldd ./consumer | grep "$libdir/libdlbridge.so" >/dev/null || { echo "57-go: the consumer did not load the installed library" >&2; exit 1; }

echo "57-go: OK"
