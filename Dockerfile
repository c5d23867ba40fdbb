# The kueue-timeshare manager image: `make image-build` (IMG=... to tag it otherwise).
# Build stage: the module's go.sum is complete, so only the Go module proxy is needed.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS builder
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG TARGETOS=linux
ARG TARGETARCH
ARG GIT_COMMIT=unknown
ARG VERSION=v0.0.0-dev
# kueue_build_info and --version report this version with the Kueue release it is built on.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X github.com/kueue-timeshare/kueue-timeshare/pkg/version.Version=${VERSION} -X github.com/kueue-timeshare/kueue-timeshare/pkg/version.GitCommit=${GIT_COMMIT}" \
      -o /out/kueue-timeshare ./cmd/kueue-timeshare
# The kubectl plugin ships in the image too: `kubectl cp` or `docker cp` it out, or run it there.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" \
      -o /out/kubectl-timeshare ./cmd/kubectl-timeshare

# Runtime stage: no shell, no package manager, non-root.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/kueue-timeshare /kueue-timeshare
COPY --from=builder /out/kubectl-timeshare /kubectl-timeshare
USER 65532:65532
ENTRYPOINT ["/kueue-timeshare"]
