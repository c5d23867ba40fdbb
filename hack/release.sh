#!/usr/bin/env bash
# Writes a release's artifacts into dist/release-<version> from the committed tree (HEAD), with SHA256SUMS:
#   kueue-timeshare-<version>-image.oci.tar         the manager's image for every platform, an OCI image
#                                                   layout archive (crane, skopeo, docker load)
#   kueue-timeshare-<version>-image-index.json      its image index: the image digest is this file's SHA-256
#   kueue-timeshare-<version>-image-context.tar.gz  the image build context, for a container engine (docker build - < it)
#   kueue-timeshare-<chart version>.tgz             the Helm chart, with the generated CRDs and the image digest
#   manifests.yaml                                  config/default as one file (kubectl apply --server-side -f)
#   kueue-timeshare-grafana-dashboard.json          the Grafana dashboard (the chart's, also as a ConfigMap)
#   kueue-timeshare-prometheus-rules.yaml           the alerting rules, a Prometheus rules file
#   kueue-timeshare-<os>-<arch>                     the manager, for each of the platforms
#   kubectl-timeshare-<os>-<arch>                   the kubectl plugin, for each of the platforms
#   kubectl-timeshare-<os>-<arch>.tar.gz            the same for krew, with the krew manifest plugin.yaml
#
#   hack/release.sh <version> <chart version> <platforms>
#   hack/release.sh --image-only <version> <platforms>   only the image, into dist/image-<version>
# Needs `make manifests`, bin/helm and bin/kubectl (the Makefile's release target sees to them).
# RELEASE_URL is where plugin.yaml says the plugin archives are downloaded from.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
image_only=false
if [[ "${1:-}" == "--image-only" ]]; then
  image_only=true
  version="$2" platforms="$3"
else
  version="$1" chart_version="$2" platforms="$3"
fi
commit="$(git rev-parse HEAD)"
# Every timestamp in the image and the archives is the commit's: the same commit, the same bytes.
commit_time="$(git show -s --format=%cI HEAD)"
commit_epoch="$(git show -s --format=%ct HEAD)"
kueue_version="$(awk '$1 == "sigs.k8s.io/kueue" {print $2}' go.mod)"
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "release: the work tree has uncommitted changes; a release is built from commits only" >&2
  exit 1
fi
if $image_only; then
  out="$root/dist/image-$version"
else
  out="$root/dist/release-$version"
fi
rm -rf "$out"
mkdir -p "$out"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
context="$work/image-context.tar.gz"
git archive --format=tar.gz -o "$context" HEAD Dockerfile go.mod go.sum apis cmd pkg LICENSE

# The binaries are built from the image context, so that they are HEAD's whatever the work tree
# holds; static (no cgo) and without build paths, so that the same commit gives the same bytes.
src="$work/src"
bins="$work/bin"
mkdir -p "$src" "$bins"
tar -xzf "$context" -C "$src"
pkg=github.com/kueue-timeshare/kueue-timeshare/pkg/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.GitCommit=$commit"
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  echo "building the manager and the kubectl plugin for $os/$arch..." >&2
  for cmd in kueue-timeshare kubectl-timeshare; do
    (cd "$src" && CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOFLAGS=-mod=readonly go build -trimpath \
      -ldflags "$ldflags" -o "$bins/$cmd-$os-$arch" "./cmd/$cmd")
  done
done

echo "writing the image for $platforms..." >&2
image="kueue-timeshare-$version-image"
digest="$(cd hack/ociimage && GOFLAGS=-mod=readonly go run . -bin-dir "$bins" -platforms "$platforms" \
  -version "$version" -kueue-version "$kueue_version" -commit "$commit" -created "$commit_time" \
  -out "$out/$image.oci.tar" -index-out "$out/$image-index.json")"

if $image_only; then
  echo "image $version ($commit) for $platforms in dist/image-$version, digest $digest" >&2
  (cd "$out" && ls -1)
  exit 0
fi

mv "$context" "$out/kueue-timeshare-$version-image-context.tar.gz"
cp "$bins"/* "$out/"

# The packaged chart pins the image by digest; the repository's chart leaves image.digest empty.
chart="$work/chart/kueue-timeshare"
mkdir -p "$work/chart"
cp -R charts/kueue-timeshare "$chart"
sed -i "s|^  digest: \"\"  # set by make release$|  digest: \"$digest\"  # set by make release|" "$chart/values.yaml"
grep -q "^  digest: \"$digest\"" "$chart/values.yaml" || { echo "release: could not set image.digest in the chart's values.yaml" >&2; exit 1; }
bin/helm package "$chart" --destination "$out" >/dev/null
[[ -f "$out/kueue-timeshare-$chart_version.tgz" ]] || { echo "release: helm did not write the chart archive" >&2; exit 1; }

bin/kubectl kustomize config/default > "$out/manifests.yaml"

cp charts/kueue-timeshare/files/grafana-dashboard.json "$out/kueue-timeshare-grafana-dashboard.json"
cp charts/kueue-timeshare/files/prometheus-rules.yaml "$out/kueue-timeshare-prometheus-rules.yaml"

# krew installs a plugin from a .tar.gz per platform, checked against plugin.yaml's sha256.
release_url="${RELEASE_URL:-https://github.com/kueue-timeshare/kueue-timeshare/releases/download/$version}"
krew_platforms=""
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  name="kubectl-timeshare-$os-$arch.tar.gz"
  stage="$work/krew-$os-$arch"
  mkdir -p "$stage"
  cp "$bins/kubectl-timeshare-$os-$arch" "$stage/kubectl-timeshare"
  cp LICENSE "$stage/LICENSE"
  chmod 0755 "$stage/kubectl-timeshare"
  chmod 0644 "$stage/LICENSE"
  tar --sort=name --mtime="@$commit_epoch" --owner=0 --group=0 --numeric-owner --format=ustar \
    -C "$stage" -cf - LICENSE kubectl-timeshare | gzip -n > "$out/$name"
  krew_platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $release_url/$name
    sha256: $(sha256sum "$out/$name" | cut -d' ' -f1)
    bin: kubectl-timeshare
    files:
    - from: kubectl-timeshare
      to: .
    - from: LICENSE
      to: .
"
done
cat > "$out/plugin.yaml" <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: timeshare
spec:
  version: $version
  homepage: https://github.com/kueue-timeshare/kueue-timeshare
  shortDescription: Show kueue-timeshare's turns, protections and waits
  description: |
    Read-only views of the kueue-timeshare manager's decisions: the settings in force per
    ClusterQueue and where they come from, who holds a turn and until when, which running
    workloads are protected and why, the pending order and waits, why a workload was preempted
    or not (explain workload), and what proposed settings would change (what-if).
  platforms:
$krew_platforms
EOF

(cd "$out" && sha256sum -- * > SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
echo "release $version ($commit) in dist/release-$version, image digest $digest:" >&2
(cd "$out" && ls -1)
