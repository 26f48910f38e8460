#!/usr/bin/env bash
# The first ```cpp block of docs/cpp.md must be tests/cpp/example.cpp, which
# the cpp suite builds and runs:  check_doc_example.sh DOC EXAMPLE
set -euo pipefail
doc=${1:?usage: check_doc_example.sh DOC EXAMPLE}
example=${2:?usage: check_doc_example.sh DOC EXAMPLE}
block=$(awk '/^```cpp$/ { on = 1; next } on && /^```$/ { exit } on { print }' "$doc")
if [ "$block" != "$(cat "$example")" ]; then
  diff <(echo "$block") "$example" || true
  echo "the first \`\`\`cpp block of $doc differs from $example (above): make them one again" >&2
  exit 1
fi
echo "the first cpp block of $doc is $example"
