# walkstage build and test targets. CI (.ci/run), the Dockerfile and the
# README all call these, so what CI checks is what the image builds.
#
#   make test         the test suite (pure Go, no CUDA needed)
#   make build        bin/walkstage, CPU engine only, static (CGO_ENABLED=0), and
#                     bin/walkstage-entrypoint, the GPU image's entrypoint (static)
#   make kernels      nvcc -> gpu/kernels.fatbin, gpu/pack.fatbin (Makefile.cuda)
#   make build-cuda   bin/walkstage-cuda with the GPU engine (needs nvcc + cuda.h)
#   make vet-cuda     go vet of the cuda-tagged packages
GO        ?= go
GOFLAGS   ?=
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.Version=$(VERSION)
TEST_FLAGS ?= -count=1 -timeout 20m

.PHONY: all test build clean

all: build

test:
	$(GO) test $(TEST_FLAGS) ./...

build:
	mkdir -p bin
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -trimpath -ldflags '$(LDFLAGS)' -o bin/walkstage ./cmd/walkstage
	CGO_ENABLED=0 $(GO) build $(GOFLAGS) -trimpath -ldflags '-s -w' -o bin/walkstage-entrypoint ./cmd/walkstage-entrypoint

clean:
	rm -rf bin .dev gpu/kernels.fatbin gpu/pack.fatbin

include Makefile.cuda
