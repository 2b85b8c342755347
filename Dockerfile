# The banlieue image: the one static binary on distroless, running as the non-root user 65532.
# Every role is a subcommand, so the entrypoint is the binary and Deployments pass only args
# (config/manager, and the operator's provider Deployments).
#
#   make build                                         # CGO_ENABLED=0 static binary in bin/banlieue
#   docker build -t registry.example/banlieue:v0.1.0 .  # or: podman build / buildah bud
#
# Without a container engine, hack/image.sh builds the same image (go-containerregistry: the
# binary at /banlieue, user 65532:65532, CA roots, the nonroot user's home as working directory);
# hack/image/main_test.go checks it against this file's COPY, USER and ENTRYPOINT, and
# test/node runs it on the lab's real node. See docs/guides/install.md for ko and crane.
FROM gcr.io/distroless/static:nonroot
COPY bin/banlieue /banlieue
USER 65532:65532
ENTRYPOINT ["/banlieue"]
