#!/usr/bin/env bash
# Builds the consumer program with nothing but the compiler and pkg-config:
#   PKG_CONFIG_PATH=<prefix>/lib/.../pkgconfig bash build.sh <output>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: build.sh OUTPUT}
# shellcheck disable=SC2046  # the flags are meant to be split
cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$out" "$here/../consumer.c" \
  $(pkg-config --cflags --libs dlbridge)
