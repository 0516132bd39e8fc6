#!/usr/bin/env bash
# Re-pin the Dockerfile's base images (ARG NODE_IMAGE, ARG RUNTIME_IMAGE: `name:tag@sha256:...`) to
# the digest each tag points to now: the multi-platform index digest, as `docker pull name:tag`
# resolves it. Run it for a base image's security fixes (Debian and Node.js rebuild their images
# under the same tag), review the diff, rebuild, and commit. docs/kubernetes.md "The image".
#
#   scripts/refresh-base-images.sh           rewrite the Dockerfile, print old -> new
#   scripts/refresh-base-images.sh --check   change nothing; exit 1 when a pin is behind its tag
#
# Needs `crane` (go-containerregistry) or Docker with buildx (`docker buildx imagetools inspect`),
# and network access to the registry. DOCKERFILE overrides the file (default: the repository's).
set -euo pipefail

DOCKERFILE="${DOCKERFILE:-$(cd "$(dirname "$0")/.." && pwd)/Dockerfile}"
CHECK=0
case "${1:-}" in
  --check) CHECK=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

digest_of() {
  if command -v crane >/dev/null 2>&1; then
    crane digest "$1"
  elif command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    docker buildx imagetools inspect "$1" --format '{{.Manifest.Digest}}'
  else
    echo "refresh-base-images: needs crane or docker buildx to ask the registry for $1's digest" >&2
    exit 2
  fi
}

# Every digest is asked for before anything is written: a failure leaves the Dockerfile as it was.
stale=0
updates=()
for arg in NODE_IMAGE RUNTIME_IMAGE; do
  current="$(sed -n "s/^ARG ${arg}=\(.*\)$/\1/p" "$DOCKERFILE")"
  if [[ ! "$current" =~ ^([^@[:space:]]+:[^@[:space:]]+)@(sha256:[0-9a-f]{64})$ ]]; then
    echo "refresh-base-images: ARG ${arg} in $DOCKERFILE is not name:tag@sha256:<digest> (${current:-missing})" >&2
    exit 2
  fi
  ref="${BASH_REMATCH[1]}"
  pinned="${BASH_REMATCH[2]}"
  if ! latest="$(digest_of "$ref")"; then
    echo "refresh-base-images: could not get the digest of $ref; nothing changed" >&2
    exit 2
  fi
  if [[ ! "$latest" =~ ^sha256:[0-9a-f]{64}$ ]]; then
    echo "refresh-base-images: the registry gave no digest for $ref (got: ${latest:-nothing}); nothing changed" >&2
    exit 2
  fi
  if [[ "$latest" == "$pinned" ]]; then
    echo "$arg $ref: current ($pinned)"
    continue
  fi
  stale=1
  echo "$arg $ref: $pinned -> $latest"
  updates+=("s|^ARG ${arg}=.*\$|ARG ${arg}=${ref}@${latest}|")
done
if [[ $CHECK == 1 ]]; then
  exit "$stale"
fi
for u in "${updates[@]}"; do sed -i "$u" "$DOCKERFILE"; done
exit 0
