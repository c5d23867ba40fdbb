#!/usr/bin/env bash
# Copies the generated manifests (`make manifests`: CRDs with our fields, upstream's manager RBAC
# and webhook configurations, our webhook configuration) into the chart, where its templates read
# them with .Files. The copy is a build output: charts/kueue-timeshare/generated/ is git-ignored.
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

rm -rf "$dst"
mkdir -p "$dst/crd" "$dst/rbac" "$dst/webhook"
cp "$src"/crd/*.yaml "$dst/crd/"
cp "$src/rbac/role.yaml" "$dst/rbac/"
cp "$src/webhook/manifests.yaml" "$src/webhook/timeshare.yaml" "$dst/webhook/"
echo "chart inputs written to ${dst#"$root/"}" >&2
