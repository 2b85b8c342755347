# The banlieue image: the one static binary on distroless, running as the non-root user 65532.
# Every role is a subcommand, so the entrypoint is the binary and Deployments pass only args
# (config/manager, and the operator's provider Deployments).
#
#   make build                                         # CGO_ENABLED=0 static binary in bin/banlieue
#   docker build -t registry.example/banlieue:v0.1.0 .  # or: podman build / buildah bud
#
# Not exercised by this repository's tests (no container engine where they run); see
# docs/guides/install.md for daemonless alternatives (ko, crane).
FROM gcr.io/distroless/static:nonroot
COPY bin/banlieue /banlieue
USER 65532:65532
ENTRYPOINT ["/banlieue"]
