# boxkite-agent image: the agent and boxkitectl (the readiness probe runs
# `boxkitectl ready`).
#
#   docker build -f deploy/images/agent.Dockerfile -t boxkite-agent:dev .
#
# Base images are pinned by digest. <PINNED_DIGEST> is a placeholder that the
# release process replaces with the digest it resolved and reviewed; until
# then the build fails on purpose instead of pulling whatever the tag points
# at today. For a local build pass e.g.
#   --build-arg BUILDER_IMAGE=debian:12 --build-arg RUNTIME_IMAGE=debian:12-slim
ARG BUILDER_IMAGE=debian:12@sha256:<PINNED_DIGEST>
ARG RUNTIME_IMAGE=debian:12-slim@sha256:<PINNED_DIGEST>

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
# Dependencies first, so this layer is cached across source changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh
COPY . .
ARG BOXKITE_VERSION=unknown
RUN make clean && make VERSION="${BOXKITE_VERSION}" build/boxkite-agent build/boxkitectl

FROM ${RUNTIME_IMAGE}
# Runtime libraries only (Debian 12 names). The BPF object is embedded in the
# agent binary (bpftool skeleton); no compiler or headers at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libbpf1 libelf1 zlib1g libmnl0 libcjson1 libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/boxkite-agent /src/build/boxkitectl /usr/local/bin/
# Runs as root: the DaemonSet runs it privileged (see deploy/daemonset.yaml).
ENTRYPOINT ["/usr/local/bin/boxkite-agent"]
CMD ["--config", "/etc/boxkite/config.json"]
