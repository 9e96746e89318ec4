# The platform binary in a small image. Built by compose.yaml; see docs/development.md.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that editing code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
# Only the Go sources of the binary: the build context may also hold a local
# database cluster (.pgdata) and node_modules that have no business here.
COPY cmd/ cmd/
COPY db/ db/
COPY httpapi/ httpapi/
COPY internal/ internal/
COPY migrations/ migrations/
COPY service/ service/
# CGO off: a static binary that runs on any base image.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/platform ./cmd/platform

FROM alpine:3.22
# ca-certificates for the model providers' HTTPS APIs; tzdata for deadlines
# shown in local time.
RUN apk add --no-cache ca-certificates tzdata \
	&& adduser -D -H -u 10001 platform
COPY --from=build /out/platform /usr/local/bin/platform
USER 10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/platform"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
