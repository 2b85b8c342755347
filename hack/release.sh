#!/usr/bin/env bash
# The release artifacts, into dist/ (docs/guides/install.md, "Installing a release"; ADR-0112):
#
#   install.yaml               config/default rendered with the release's image, the CRDs first
#   banlieue-<chart>.tgz       charts/banlieue packaged by helm (hack/helm.sh), version <chart>
#   banlieue-image.tar         the image tarball of hack/image.sh (make image)
#   infrastructure-components.yaml, build-namespace.yaml
#                              install.yaml split for clusterctl (ADR-0137): clusterctl takes one
#                              Namespace, banlieue-system, and moves every namespaced object into
#                              its target namespace; the build namespace banlieue-imagebuild and
#                              its objects, applied before `clusterctl init`, keep their own
#   metadata.yaml, cluster-template.yaml
#                              clusterctl's metadata and cluster template (templates/)
#   banlieue.cdx.json          the SBOM: CycloneDX JSON of the binary (the image's one program) by
#                              cyclonedx-gomod, every Go module with its version and the Go
#                              standard library it was built with
#   SHA256SUMS                 sha256sum of them all; `sha256sum -c SHA256SUMS` verifies them
#
#   hack/release.sh            what `make release` runs
#
# Env: VERSION   the release's version, SemVer with a leading v and no +build
#                (default: `git describe --tags --always --dirty`, the Makefile's; one that is
#                not SemVer, such as an untagged commit's, becomes the prerelease
#                v0.0.0-<describe>). The binary, the image's
#                label and tag, the chart's appVersion and, without the v, the chart's version.
#      IMAGE     the image reference (default registry.example/banlieue:<VERSION>), written into
#                install.yaml, the image tarball and (as the chart's default) the chart; a
#                repository and the tag VERSION, no digest, no registry port (the kustomize
#                install splits the reference at ':' for the ProviderClass)
#      DIST      the output directory (default dist); earlier artifacts in it are replaced
#
# Two runs at the same commit write byte-identical install.yaml and chart (test/release).
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

log() { echo "release: $*" >&2; }
die() { log "$*"; exit 1; }

# No +build metadata: the version is also the image's tag, and a tag cannot hold a '+'.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
if [[ ! $version =~ $semver ]]; then
  [[ -z "${VERSION:-}" ]] || die "VERSION=$VERSION is not SemVer with a leading v (e.g. v0.1.0)"
  version="v0.0.0-$version"
  [[ $version =~ $semver ]] || die "cannot make a SemVer version of $(git describe --tags --always --dirty)"
fi
chart_version="${version#v}"
image="${IMAGE:-registry.example/banlieue:$version}"
repository="${image%:*}"
tag="${image##*:}"
[[ $image == *:* && $tag != */* && $repository != *:* && $image != *@* ]] ||
  die "IMAGE=$image: want repository:tag, with no digest and no registry port"
# One version names everything: the chart's appVersion is its default image tag.
[[ $tag == "$version" ]] || die "IMAGE=$image: its tag must be the release's version $version"
dist="${DIST:-dist}"

mkdir -p "$dist"
dist="$(cd "$dist" && pwd)"
rm -f "$dist"/install.yaml "$dist"/banlieue-*.tgz "$dist"/banlieue-image.tar "$dist"/SHA256SUMS "$dist"/banlieue.cdx.json \
  "$dist"/infrastructure-components.yaml "$dist"/build-namespace.yaml "$dist"/metadata.yaml "$dist"/cluster-template.yaml
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# install.yaml: config/default with the release's image, rendered by kubectl's kustomize (the
# envtest kubectl, as test/install renders it). The copy keeps the repository's files untouched,
# and config/default's replacements give the ProviderClass the same image.
kubectl="$(hack/envtest-assets.sh | tail -1)/kubectl"
cp -r config "$work/config"
sed -i -e "s|^  newName: .*|  newName: $repository|" -e "s|^  newTag: .*|  newTag: $tag|" "$work/config/default/kustomization.yaml"
grep -q "^  newTag: $tag$" "$work/config/default/kustomization.yaml" ||
  die "config/default/kustomization.yaml has no images entry to point at $image"
"$kubectl" kustomize "$work/config/default" >"$work/rendered.yaml"
# CRDs first: a CustomResource (the ProviderClass) resolves only once its CRD exists, and
# kustomize puts Namespaces before CRDs.
awk -v crds="$work/crds.yaml" -v rest="$work/rest.yaml" '
  function flush() { if (doc != "") printf "---\n%s", doc >(doc ~ /(^|\n)kind: CustomResourceDefinition\n/ ? crds : rest); doc = "" }
  /^---$/ { flush(); next }
  { doc = doc $0 "\n" }
  END { flush() }' "$work/rendered.yaml"
cat "$work/crds.yaml" "$work/rest.yaml" >"$dist/install.yaml"
[[ "$(grep -c '^kind: ' "$dist/install.yaml")" == "$(grep -c '^kind: ' "$work/rendered.yaml")" ]] ||
  die "install.yaml lost documents while putting the CRDs first"
log "wrote install.yaml ($(grep -c '^kind: ' "$dist/install.yaml") objects, $(grep -c '^kind: CustomResourceDefinition$' "$dist/install.yaml") CRDs)"

# clusterctl's files: install.yaml split at the build namespace (the Namespace object and what
# lives in it), then the metadata and the cluster template as they are.
awk -v build="$dist/build-namespace.yaml" -v rest="$dist/infrastructure-components.yaml" '
  function flush() {
    if (doc == "") return
    inbuild = doc ~ /\n  namespace: banlieue-imagebuild\n/ || (doc ~ /(^|\n)kind: Namespace\n/ && doc ~ /\n  name: banlieue-imagebuild\n/)
    printf "---\n%s", doc >(inbuild ? build : rest); doc = ""
  }
  /^---$/ { flush(); next }
  { doc = doc $0 "\n" }
  END { flush() }' "$dist/install.yaml"
[[ "$(grep -c '^kind: Namespace$' "$dist/infrastructure-components.yaml")" == 1 ]] ||
  die "infrastructure-components.yaml must hold exactly one Namespace for clusterctl"
[[ "$(cat "$dist/build-namespace.yaml" "$dist/infrastructure-components.yaml" | grep -c '^kind: ')" == "$(grep -c '^kind: ' "$dist/install.yaml")" ]] ||
  die "splitting install.yaml for clusterctl lost documents"
cp metadata.yaml "$dist/metadata.yaml"
cp templates/cluster-template.yaml "$dist/cluster-template.yaml"
log "wrote infrastructure-components.yaml ($(grep -c '^kind: ' "$dist/infrastructure-components.yaml") objects), build-namespace.yaml, metadata.yaml, cluster-template.yaml"

# The chart: its image defaults to the release's (repository in values, tag = appVersion).
helm="$(hack/helm.sh | tail -1)"
cp -r charts/banlieue "$work/banlieue"
sed -i "s|^  repository: registry.example/banlieue$|  repository: $repository|" "$work/banlieue/values.yaml"
grep -q "^  repository: $repository$" "$work/banlieue/values.yaml" ||
  die "charts/banlieue/values.yaml has no image.repository registry.example/banlieue to replace"
"$helm" package "$work/banlieue" --version "$chart_version" --app-version "$version" --destination "$work/chart" >&2
chart="$work/chart/banlieue-$chart_version.tgz"
# helm stamps every entry with the time of packaging; repack with the commit's time, names
# sorted, so the same commit packs the same bytes.
epoch="$(git log -1 --format=%ct)"
mkdir "$work/unpacked"
tar -C "$work/unpacked" -m -xzf "$chart"
tar -C "$work/unpacked" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  --format=ustar -cf - banlieue | gzip -n -9 >"$dist/banlieue-$chart_version.tgz"
log "wrote banlieue-$chart_version.tgz (chart $chart_version, appVersion $tag)"

# The image (make image), stamped with the same version.
VERSION="$version" IMAGE="$image" hack/image.sh >/dev/null
cp bin/banlieue-image.tar "$dist/banlieue-image.tar"
log "wrote banlieue-image.tar ($image)"

# The SBOM, from the binary's own build information (go version -m): what was built, not what
# go.mod asks for. cyclonedx-gomod is built once from the Go module proxy into the cache.
cdx_version=v1.10.0
cdx="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/cyclonedx-gomod/$cdx_version/cyclonedx-gomod"
if [[ ! -x $cdx ]]; then
  log "building cyclonedx-gomod $cdx_version from the Go module proxy"
  GOBIN="$(dirname "$cdx")" go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$cdx_version" >&2
fi
"$cdx" bin -json -std -noserial -notimestamp -version "$version" -output "$dist/banlieue.cdx.json" bin/banlieue
log "wrote banlieue.cdx.json ($(grep -c '"bom-ref"' "$dist/banlieue.cdx.json") references)"

(cd "$dist" && sha256sum install.yaml "banlieue-$chart_version.tgz" banlieue-image.tar banlieue.cdx.json \
  infrastructure-components.yaml build-namespace.yaml metadata.yaml cluster-template.yaml >SHA256SUMS)
log "wrote SHA256SUMS into $dist"
echo "$dist"
