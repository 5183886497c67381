# boxkite-shim image: the shim binary and the shared libraries it loads,
# nothing else (no shell, no package manager, no other binaries), run as the
# unprivileged uid/gid 65532.
#
#   docker build -f deploy/images/shim.Dockerfile -t boxkite-shim:dev .
#
# The builder is pinned by digest. <PINNED_DIGEST> is a placeholder that the
# release process replaces with the digest it resolved and reviewed; until
# then the build fails on purpose. For a local build pass
#   --build-arg BUILDER_IMAGE=debian:12
# The runtime stage is `scratch` (an empty filesystem, not an image to pull),
# so it needs no digest: its whole content is what collect-libs.sh copies.
ARG BUILDER_IMAGE=debian:12@sha256:<PINNED_DIGEST>

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh
COPY . .
ARG BOXKITE_VERSION=unknown
RUN make clean && make VERSION="${BOXKITE_VERSION}" build/boxkite-shim
RUN deploy/images/collect-libs.sh /rootfs build/boxkite-shim /usr/local/bin/boxkite-shim

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/boxkite-shim"]
