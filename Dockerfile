# syntax=docker/dockerfile:1.7
#
# ipgate image: multi-stage, production dependencies and compiled output only, non-root (uid 10001),
# read-only root filesystem friendly, SIGTERM delivered to ipgate, which drains and exits 0.
#
#   docker build -t ipgate:0.1.0 .
#   docker build -t ipgate:0.1.0-netbind --build-arg NET_BIND_SERVICE=1 .   # hostNetwork + port < 1024
#   docker run --rm -p 8080:8080 -v $PWD/my.yaml:/etc/ipgate/config.yaml:ro ipgate:0.1.0
#
# The build runs the same npm scripts as CI: `npm ci`, `npm run build` (tsc -p tsconfig.build.json: src only).

# Node 24 "Krypton" is the Active LTS line (supported to April 2028). CI also runs the test suite on
# Node 24 so the image's runtime is tested, not only the developers' Node 20.
#
# Both bases are pinned by digest (the multi-platform index, so amd64 and arm64 builds each get
# their own image of the same release): a tag moves, and a rebuild of the same commit would
# otherwise ship whatever the tag points to that day. The runtime is Debian's slim image with only
# the node binary copied in, so the runtime stage has no npm, npx, corepack or yarn (the node
# image's package managers and their dependency trees: never run by ipgate, but scanned, patched
# and present for anyone who gets a shell). Refresh both digests together, for security fixes, with
# `scripts/refresh-base-images.sh` (docs/kubernetes.md "The image"); node:24-bookworm-slim is
# itself built on debian:bookworm-slim, so the binary and the libraries it links (libc, libstdc++,
# libgcc_s) come from the same release.
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
ARG RUNTIME_IMAGE=debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241

# ---- build: all dependencies, compile TypeScript ----------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- deps: production dependencies only (a clean install, not a prune of the build tree) --------
FROM ${NODE_IMAGE} AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund

# ---- node: the Node.js binary alone, for the runtime --------------------------------------------
FROM ${NODE_IMAGE} AS node

# ---- runtime ------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime
ARG RUNTIME_IMAGE
ARG NET_BIND_SERVICE=0
# The node binary and nothing else of the node image (/usr/local/lib/node_modules holds npm and
# corepack, /opt/yarn-* yarn).
COPY --from=node /usr/local/bin/node /usr/local/bin/node

# tini as PID 1: ipgate handles SIGTERM/SIGINT itself (drain, exit 0), but PID 1 also has to reap
# orphaned processes and must not ignore signals it has no handler for; tini forwards the signal to
# ipgate only (not -g: the primary process coordinates its workers' drain itself).
# With NET_BIND_SERVICE=1, node gets the file capability cap_net_bind_service: Kubernetes grants no
# ambient capabilities, so this is the only way a non-root process binds a port < 1024 (hostNetwork).
# Such an image only starts where NET_BIND_SERVICE is in the bounding set (the chart adds it then).
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends tini libjemalloc2; \
    ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2; \
    if [ "$NET_BIND_SERVICE" = "1" ]; then \
      apt-get install -y --no-install-recommends libcap2-bin; \
      setcap cap_net_bind_service=+ep "$(readlink -f "$(command -v node)")"; \
      apt-get purge -y --auto-remove libcap2-bin; \
    fi; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid 10001 ipgate; \
    useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin ipgate; \
    mkdir -p /etc/ipgate /var/lib/ipgate /app; \
    chown 10001:0 /var/lib/ipgate; \
    chmod 0770 /var/lib/ipgate; \
    ln -s /var/lib/ipgate /app/data
# /var/lib/ipgate: the runtime user's (uid 10001), and group 0 with the same rights, so an arbitrary
# uid in group 0 (OpenShift's restricted SCC) can write it too. /app/data -> /var/lib/ipgate: the
# file store's default path (store.path ./data/allowlists.json, relative to the working directory
# /app) lands in the volume instead of a root-owned /app/data that uid 10001 cannot create (EACCES).

# Memory (bench/README.md "Memory after a mixed run", issue 31; docs/kubernetes.md "Memory"):
# - LD_PRELOAD of jemalloc (Debian's libjemalloc2, linked at one path for every architecture):
#   glibc's malloc keeps what the main thread freed in the middle of its arena (OpenSSL's and the
#   sockets' memory after a burst of handshakes: 15-20 MiB on Node 24 after a mixed run) and has no
#   trim Node can call; jemalloc returns freed pages on its own (dirty pages decay in 10 s). Its
#   whole footprint after the same run: 18-20 MiB against 22-36 for glibc's arenas and large blocks
#   (RSS 124.8-125.6 MiB against 128.6-140.4 in three A/B runs under a 512Mi limit); instructions
#   per request (callgrind, Node 24) +0.3% denied, -8.0% allowed.
# - MALLOC_ARENA_MAX=2: glibc gives every thread that mallocs (the libuv pool, V8's compiler and GC
#   helpers) an arena of its own, up to 8 per core; after a mixed run six of them held 19-20 MiB on
#   Node 24, freed but kept. Two arenas: 3.4 MiB, no CPU cost visible in the same rounds. Kept for
#   a pod that clears LD_PRELOAD (glibc's malloc again); jemalloc does not read it.
# - --max-semi-space-size=8: V8's young generation is two semi-spaces, all of it resident under load.
#   Node 24 lets each grow to 32-64 MiB on a large host; under the chart's 512Mi limit Node's own
#   choice is 1 MiB, which doubles the collector's pauses (Node 20: 26% of the CPU in a mixed run
#   against 13-17%). 8 MiB: 16 MiB resident instead of 32 at 16 MiB (the previous cap); pauses 12.4%
#   of the CPU against 11.8% in the same rounds.
ENV NODE_ENV=production LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 MALLOC_ARENA_MAX=2 NODE_OPTIONS=--max-semi-space-size=8
WORKDIR /app
# Owned by root and not writable by the ipgate user: the code cannot be changed at run time
# (the one entry it may write through is the data link above).
COPY package.json ./
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
# main.ts resolves the bundled demo at ../../config/demo.yaml; it is also the default config file,
# so `docker run ipgate` starts. Mount your own at /etc/ipgate/config.yaml (the chart does).
COPY config/demo.yaml ./config/demo.yaml
COPY config/demo.yaml /etc/ipgate/config.yaml

# The file store's directory (store.type file; the default store.path resolves to
# /var/lib/ipgate/allowlists.json through /app/data): the only place ipgate writes, so the root
# filesystem can be read-only.
VOLUME ["/var/lib/ipgate"]

USER 10001:10001
# 8080: the usual data listener port (listeners are configured, not fixed); 9901: admin API,
# /healthz, /readyz, /metrics. Ports < 1024 need the NET_BIND_SERVICE=1 variant.
EXPOSE 8080 9901

# No curl in the slim image: node itself probes the admin port (override the URL with
# IPGATE_HEALTHCHECK_URL when admin.listen is elsewhere). Kubernetes ignores HEALTHCHECK and uses the
# chart's probes on the same endpoints.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const u=process.env.IPGATE_HEALTHCHECK_URL||'http://127.0.0.1:9901/healthz';require('node:http').get(u,{timeout:2500},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/src/main.js"]
CMD ["run", "--config", "/etc/ipgate/config.yaml"]

LABEL org.opencontainers.image.title="ipgate" \
      org.opencontainers.image.description="Edge proxy that keeps the real client IP and admits only allowlisted clients" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.base.name="docker.io/library/${RUNTIME_IMAGE}"
