# For Docker users only: `make image` is the tested, daemonless and
# reproducible way to build this image (see README, "Install on EKS").
# This file makes an image of the same shape: a static binary, the CA roots
# of golang.org/x/crypto/x509roots/fallback, no shell, user 65532.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(cat VERSION) --build-arg REVISION=$(git rev-parse HEAD) -t <image> .
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=devel
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/instancemgr/instance-manager/version.Version=${VERSION} -X github.com/instancemgr/instance-manager/version.Revision=${REVISION}" \
      -o /out/instance-manager . \
 && go run ./build/image/cmd/imagebuild ca-bundle > /out/ca-certificates.crt \
 && mkdir -m 1777 /out/tmp

FROM scratch
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/instancemgr/instance-manager" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build /out/instance-manager /usr/local/bin/instance-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/instance-manager"]
