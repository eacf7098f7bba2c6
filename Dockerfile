# syntax=docker/dockerfile:1
#
# walkstage images, built from the repository root:
#
#   docker build -t walkstage:dev .                 GPU engine (default target "gpu")
#   docker build --target cpu -t walkstage:dev-cpu .  CPU engine only, no CUDA at all
#
# The build stages run the Makefile targets that .ci/run runs (make build,
# make kernels, make build-cuda-bin); deploy/deploy_test.go fails when a
# `make` target here is not one CI runs, so what CI checks is what ships.
# Both runtime images run `walkstage run` as uid 65532 and are configured only
# by WALKSTAGE_* variables (stage/config/config.go); the HTTP server on :9090 serves
# /metrics, /healthz and /readyz. The binary alone listens on 127.0.0.1:9090;
# the images set WALKSTAGE_METRICS_ADDR=:9090, every interface of the
# container's own network (docker run -p, a pod's IP for its probes).

# Base images by digest, so a rebuild gets the same toolchain and libraries
# until the digest is changed on purpose. GO_IMAGE is golang:1.26-bookworm
# as docker-library/repo-info recorded it (Go 1.26.7, August 2026;
# repos/golang/remote/1.26-bookworm.md). The distroless runtime bases stay
# tags: no published record of their digests could be checked here; pin
# them with --build-arg CPU_BASE=...@sha256:... (docs/reference/deploy.md,
# "Pin the base images").
ARG GO_IMAGE=golang:1.26-bookworm@sha256:38f30937ff0751bd8c202e53556168b9093302ee6d591e7e65a9d1b84a9d360c
ARG CPU_BASE=gcr.io/distroless/static-debian12:nonroot
ARG GPU_BASE=gcr.io/distroless/base-debian12:nonroot

# ---- CPU binary: static, CGO_ENABLED=0 (make build) ----
FROM ${GO_IMAGE} AS build-cpu
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/root/.cache/go-build \
    make build VERSION="${VERSION}"

# ---- GPU binary: nvcc kernels embedded, cgo with the cuda tag ----
# Debian's nvidia-cuda-toolkit (CUDA 11.8) is in contrib/non-free; it is
# enabled the same way as in .ci/run. The binary links Debian's libcuda stub
# (soname libcuda.so.1): the real driver library comes from the node.
FROM ${GO_IMAGE} AS build-gpu
# The toolkit at the version CI builds and vets with (Debian bookworm's);
# --build-arg CUDA_TOOLKIT_VERSION= takes whatever the mirror has.
ARG CUDA_TOOLKIT_VERSION=11.8.89~11.8.0-5~deb12u1
RUN sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' \
        /etc/apt/sources.list.d/debian.sources \
 && apt-get update \
 && apt-get install -y --no-install-recommends "nvidia-cuda-toolkit${CUDA_TOOLKIT_VERSION:+=${CUDA_TOOLKIT_VERSION}}" \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/root/.cache/go-build \
    make kernels && make build-cuda-bin VERSION="${VERSION}"

# ---- CPU runtime: no libc, no CUDA ----
FROM ${CPU_BASE} AS cpu
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="walkstage (CPU)" \
      org.opencontainers.image.description="Kafka -> random walks -> Parquet pipeline stage, CPU engine only" \
      org.opencontainers.image.source="https://github.com/walkstage/walkstage" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build-cpu /src/bin/walkstage /usr/local/bin/walkstage
ENV WALKSTAGE_METRICS_ADDR=:9090
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/walkstage"]
CMD ["run"]

# ---- GPU runtime (default target): glibc for cgo, no CUDA libraries ----
# libcuda.so.1 is deliberately absent: the NVIDIA container runtime (or the
# GPU operator's toolkit) injects the node driver's copy, which must match the
# kernel module. The variables below tell it which devices and which driver
# capabilities to expose; Kubernetes' device plugin narrows the devices to the
# ones allocated to the pod.
#
# The CUDA build cannot start without that library and a driver (cu
# initialises CUDA when the process starts), so the image also ships the CPU
# build, and its entrypoint (cmd/walkstage-entrypoint, static) runs
# `walkstage-cuda gpu-probe` and execs the CUDA build when it passes, the CPU
# build when it fails and WALKSTAGE_ENGINE is auto; WALKSTAGE_ENGINE=gpu
# without a usable GPU fails with the probe's reason. The same image thus runs
# on GPU and CPU-only nodes.
FROM ${GPU_BASE} AS gpu
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="walkstage" \
      org.opencontainers.image.description="Kafka -> GPU random walks -> Parquet pipeline stage (CUDA engine, CPU fallback)" \
      org.opencontainers.image.source="https://github.com/walkstage/walkstage" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build-cpu /src/bin/walkstage-entrypoint /usr/local/bin/walkstage
COPY --from=build-cpu /src/bin/walkstage /usr/local/lib/walkstage/walkstage-cpu
COPY --from=build-gpu /src/bin/walkstage-cuda /usr/local/lib/walkstage/walkstage-cuda
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
ENV WALKSTAGE_METRICS_ADDR=:9090
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/walkstage"]
CMD ["run"]
