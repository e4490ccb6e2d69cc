# A kind node image whose container runtime is swapcri instead of containerd.
#   docker build -t kindest/node:swapcri .
#   kind create cluster --image kindest/node:swapcri --config contrib/kind/cluster.yaml
# See docs/kind.md. The binary must link against the glibc of the base image: build it on the
# same Debian release (kindest/node of Kubernetes 1.37 is Debian trixie). Needs BuildKit (the
# default builder since Docker 23; DOCKER_BUILDKIT=1 before): the crate downloads and cargo's
# build directory are cache mounts, so a rebuild compiles swapcri itself, not its dependencies.
ARG BASE_IMAGE=kindest/node:v1.37.0
ARG RUST_IMAGE=rust:1-trixie

FROM ${RUST_IMAGE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends protobuf-compiler pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked && install -m 0755 target/release/swapcri /swapcri

FROM ${BASE_IMAGE}
COPY --from=build /swapcri /usr/local/bin/swapcri
COPY contrib/systemd/swapcri.service /etc/systemd/system/swapcri.service
COPY contrib/crictl.yaml /etc/crictl.yaml
COPY contrib/kind/config.toml /etc/swapcri/config.toml
COPY contrib/kind/node-setup.sh /usr/local/lib/swapcri/node-setup.sh
RUN sh /usr/local/lib/swapcri/node-setup.sh
