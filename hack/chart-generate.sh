#!/usr/bin/env bash
# Copies the generated manifests (hack/manifests.sh: CRDs with our fields, upstream's manager RBAC
# and webhook configurations, our webhook configuration) into the chart, where its templates read
# them with .Files, and writes the kustomization config/default builds them with. Both are build
# outputs: charts/kueue-timeshare/generated/ and config/_output are git-ignored.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/config/_output"
dst="$root/charts/kueue-timeshare/generated"

for f in crd rbac/role.yaml webhook/manifests.yaml webhook/timeshare.yaml; do
  if [[ ! -e "$src/$f" ]]; then
    echo "missing $src/$f: run \`make manifests\` first" >&2
    exit 1
  fi
done

# config/default (kubectl apply -k) reads the generated manifests through this kustomization:
# kustomize only loads files at or below a kustomization's own directory. Our webhooks join
# upstream's ValidatingWebhookConfiguration, the one upstream's certificate rotator injects its
# CA into.
{
  echo "# Written by hack/chart-generate.sh (make manifests)."
  echo "resources:"
  for f in "$src"/crd/*.yaml; do echo "  - crd/$(basename "$f")"; done
  echo "  - rbac/role.yaml"
  echo "  - webhook/manifests.yaml"
  echo "patches:"
  echo "  - path: webhook/timeshare.yaml"
  echo "    target:"
  echo "      kind: ValidatingWebhookConfiguration"
  echo "      name: validating-webhook-configuration"
} > "$src/kustomization.yaml"

rm -rf "$dst"
mkdir -p "$dst/crd" "$dst/rbac" "$dst/webhook"
cp "$src"/crd/*.yaml "$dst/crd/"
cp "$src/rbac/role.yaml" "$dst/rbac/"
cp "$src/webhook/manifests.yaml" "$src/webhook/timeshare.yaml" "$dst/webhook/"
echo "chart inputs written to ${dst#"$root/"}, kustomization to ${src#"$root/"}" >&2
