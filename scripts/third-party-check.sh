#!/usr/bin/env bash
# `make third-party-check`: each copy in third_party/ is its module as the Go module proxy serves
# it (sha256 in go.sum's h1: line, checked by `go mod download`), less what no package here builds
# from (docs/ and examples/ — GoMLX's are 46 MB and 65 MB — docker/ and the repository's
# dot-files), with its patches of third_party/patches/ applied, and nothing else. It copies the
# pristine module, formats it with gofmt, applies every patch of the copy in name order and
# compares the trees.
set -euo pipefail
cd "$(dirname "$0")/.."

# copy module version patch-prefix
check() {
	local copy=$1 module=$2 version=$3 prefix=$4
	local dir
	dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$dir" ] || { echo "third-party-check: go mod download gave no directory for $module@$version" >&2; exit 1; }
	local tmp
	tmp=$(mktemp -d)
	cp -r "$dir" "$tmp/copy"
	chmod -R u+w "$tmp/copy"
	rm -rf "$tmp/copy"/{docs,examples,docker,.github,.dockerignore,.gitignore,.golangci.yml,.sccignore}
	# Some of the modules' files are not as this Go's gofmt writes them (import order, doc-comment
	# spacing: 25 of GoMLX v0.26.0's, 5 of go-xla v0.1.4's); the copy is gofmt'd so the repository's
	# gofmt check covers every Go file in it.
	gofmt -w "$tmp/copy"
	local n=0
	for p in third_party/patches/"$prefix"-*.patch; do
		[ -e "$p" ] || continue
		patch -s -p1 -d "$tmp/copy" <"$p"
		n=$((n + 1))
	done
	if ! diff -r "$tmp/copy" "third_party/$copy"; then
		rm -rf "$tmp"
		echo "third-party-check: third_party/$copy differs from $module $version + third_party/patches/$prefix-* (above)" >&2
		exit 1
	fi
	rm -rf "$tmp"
	echo "third-party-check: third_party/$copy = $module $version (less docs, examples, docker, dot-files; gofmt'd) + $n patch(es)"
}

check gomlx github.com/gomlx/gomlx v0.26.0 gomlx-v0.26.0
check go-xla github.com/gomlx/go-xla v0.1.4 go-xla-v0.1.4
