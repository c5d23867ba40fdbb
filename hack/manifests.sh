#!/usr/bin/env bash
# Produces the manifests the manager needs under config/_output (git-ignored): Kueue's CRDs,
# webhook configurations and manager RBAC, taken from the sigs.k8s.io/kueue module this
# project builds against so they always match the Go types in use, with our fields and our
# webhook configuration added.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
kueue="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
if [[ -z "$kueue" || ! -d "$kueue/config/components" ]]; then
  go mod download sigs.k8s.io/kueue
  kueue="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
fi
src="$kueue/config/components"
out="config/_output"

rm -rf "$out"
mkdir -p "$out/crd" "$out/webhook" "$out/rbac"
cp "$src"/crd/bases/*.yaml "$out/crd/"
cp "$src/webhook/manifests.yaml" "$out/webhook/"
cp "$src/rbac/role.yaml" "$out/rbac/"
# The module cache is read-only; the outputs are ours to regenerate.
chmod -R u+w "$out"

# Our additions: extension fields in the CRDs, and our own webhook configuration.
go run ./hack/crdpatch "$out/crd"
cp config/webhook/timeshare.yaml "$out/webhook/"
echo "manifests written to $out" >&2
