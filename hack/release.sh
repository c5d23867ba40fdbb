#!/usr/bin/env bash
# Writes a release's artifacts into dist/ from the committed tree (HEAD), with SHA256SUMS:
#   kueue-timeshare-<version>-image-context.tar.gz  the image build context (docker build - < it)
#   kueue-timeshare-<chart version>.tgz            the Helm chart, with the generated CRDs
#   manifests.yaml                                 config/default as one file (kubectl apply --server-side -f)
#   kueue-timeshare-<os>-<arch>                    the manager, for each of RELEASE_PLATFORMS
#   kubectl-timeshare-<os>-<arch>                  the kubectl plugin, for each of RELEASE_PLATFORMS
#
#   hack/release.sh <version> <chart version> <platforms>
# Needs `make manifests`, bin/helm and bin/kubectl (the Makefile's release target sees to them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="$1" chart_version="$2" platforms="$3"
commit="$(git rev-parse HEAD)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "release: the work tree has uncommitted changes; a release is built from commits only" >&2
  exit 1
fi
out="$root/dist/release-$version"
rm -rf "$out"
mkdir -p "$out"

git archive --format=tar.gz -o "$out/kueue-timeshare-$version-image-context.tar.gz" HEAD \
  Dockerfile go.mod go.sum apis cmd pkg LICENSE

bin/helm package charts/kueue-timeshare --destination "$out" >/dev/null
[[ -f "$out/kueue-timeshare-$chart_version.tgz" ]] || { echo "release: helm did not write the chart archive" >&2; exit 1; }

bin/kubectl kustomize config/default > "$out/manifests.yaml"

# The binaries are built from the image context, so that they are HEAD's whatever the work tree holds.
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
tar -xzf "$out/kueue-timeshare-$version-image-context.tar.gz" -C "$src"
pkg=github.com/kueue-timeshare/kueue-timeshare/pkg/version
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  echo "building the manager for $os/$arch..." >&2
  (cd "$src" && CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOFLAGS=-mod=readonly go build -trimpath \
    -ldflags "-s -w -X $pkg.Version=$version -X $pkg.GitCommit=$commit" \
    -o "$out/kueue-timeshare-$os-$arch" ./cmd/kueue-timeshare)
  echo "building the kubectl plugin for $os/$arch..." >&2
  (cd "$src" && CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" \
    -o "$out/kubectl-timeshare-$os-$arch" ./cmd/kubectl-timeshare)
done

(cd "$out" && sha256sum -- * > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
echo "release $version ($commit) in dist/release-$version:" >&2
(cd "$out" && ls -1)
