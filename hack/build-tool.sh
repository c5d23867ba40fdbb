#!/usr/bin/env bash
# Builds a pinned Go tool from one of the small modules under hack/ into bin/, only when the
# binary is missing or its module's go.mod/go.sum changed since the last build.
#
#   hack/build-tool.sh <module dir under hack/> <package> <binary name> [ldflags] [build tags]
#
# Everything comes from the Go module proxy through the committed go.sum; nothing else is downloaded.
# Without symbol tables and DWARF (-s -w): nobody debugs the tools, and their links are shorter.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
moddir="$root/hack/$1"
pkg="$2"
out="$root/bin/$3"
stamp="$root/bin/.$3.stamp"
ldflags="${4:-}"
tags="${5:-}"

want="$( (cat "$moddir/go.mod" "$moddir/go.sum"; echo "$ldflags"; if [[ -n "$tags" ]]; then echo "tags $tags"; fi) | sha256sum | cut -d' ' -f1)"
if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

mkdir -p "$root/bin"
echo "building $3 from $pkg (cached in bin/ afterwards)..." >&2
start=$SECONDS
(cd "$moddir" && GOFLAGS=-mod=readonly go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
mv "$out.tmp" "$out"
echo "$want" > "$stamp"
echo "built bin/$3 in $((SECONDS - start))s" >&2
