# The release image, built by GoReleaser (.goreleaser.yaml, dockers_v2) from the binaries
# it has already built and stamped: its context holds linux/amd64/tmend and
# linux/arm64/tmend. It sets the OCI labels. To build from source, use deploy/Dockerfile.
FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETPLATFORM
COPY $TARGETPLATFORM/tmend /usr/local/bin/tmend
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tmend"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
