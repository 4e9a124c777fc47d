#!/usr/bin/env bash
# `make third-party-check`: third_party/gomlx is GoMLX v0.26.0 as the Go module proxy serves it
# (sha256 in go.sum's h1: line, checked by `go mod download`), less what no package here builds from
# (docs/ and examples/, 46 MB and 65 MB; docker/ and the repository's dot-files), with the patches of third_party/patches/ applied, and nothing
# else. It copies the pristine module, formats it with gofmt, applies every patch in name order and
# compares the trees.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(go mod download -json github.com/gomlx/gomlx@v0.26.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "third-party-check: go mod download gave no directory for github.com/gomlx/gomlx@v0.26.0" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$dir" "$tmp/gomlx"
chmod -R u+w "$tmp/gomlx"
rm -rf "$tmp/gomlx"/{docs,examples,docker,.github,.dockerignore,.gitignore,.golangci.yml,.sccignore}
# 25 of v0.26.0's files are not as this Go's gofmt writes them (import order, doc-comment
# spacing); the copy is gofmt'd so the repository's gofmt check covers every Go file in it.
gofmt -w "$tmp/gomlx"
for p in third_party/patches/gomlx-v0.26.0-*.patch; do
	patch -s -p1 -d "$tmp/gomlx" <"$p"
done
if ! diff -r "$tmp/gomlx" third_party/gomlx; then
	echo "third-party-check: third_party/gomlx differs from GoMLX v0.26.0 + third_party/patches (above)" >&2
	exit 1
fi
echo "third-party-check: third_party/gomlx = GoMLX v0.26.0 (less docs, examples, docker, dot-files; gofmt'd) + $(ls third_party/patches/gomlx-v0.26.0-*.patch | wc -l) patch(es)"
