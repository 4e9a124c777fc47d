#!/usr/bin/env bash
# Builds libtokenizers.a, the Rust static library that github.com/daulet/tokenizers (the version
# go.mod pins) links against, with cargo from crates.io, into bin/hftokenizers/. The `-tags
# hftokenizers` build of posttrain then links it with CGO_LDFLAGS=-L$PWD/bin/hftokenizers.
#
# The crate is the one inside the Go module (its Cargo.toml and src/), built in a copy with two
# edits, both outside what posttrain calls:
#   - tiktoken-rs: the module's Cargo.toml takes it from a git branch (a fork of 0.8.0 with a newer
#     fancy-regex); here it comes from crates.io at TIKTOKEN_RS (same CoreBPE API). posttrain never
#     calls tokenizers_from_tiktoken; the symbol is still built, since the Go side references it.
#   - [dev-dependencies] and [[bench]] are dropped (the crate's own benchmarks only).
# Every other dependency is pinned by scripts/hftokenizers/Cargo.lock, which was made from the
# module's own Cargo.lock (HuggingFace's `tokenizers` crate 0.22.0, as daulet/tokenizers v1.24.0
# ships it) with only tiktoken-rs re-resolved. `cargo build --locked` fails if they disagree.
#
#   bash scripts/hftokenizers/build.sh            # build (skipped when the stamp matches)
#   bash scripts/hftokenizers/build.sh --relock   # re-resolve Cargo.lock from the module's lock
#
# The build is skipped when bin/hftokenizers/libtokenizers.a exists and its stamp (sha256 of the
# module version, the edited Cargo.toml, Cargo.lock and this script) matches, or when the cache
# (HFTOKENIZERS_CACHE, default ~/.cache/posttrain/hftokenizers; a fresh clone, such as CI's, finds
# there what an earlier build on the machine left) holds a library with that stamp.
set -euo pipefail
cd "$(dirname "$0")/../.."

TIKTOKEN_RS="=0.9.1"
HERE=scripts/hftokenizers
OUT=bin/hftokenizers
relock=false
[ "${1:-}" = "--relock" ] && relock=true

command -v cargo >/dev/null 2>&1 || [ ! -x "$HOME/.cargo/bin/cargo" ] || export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "hftokenizers: cargo not found (install Rust: rustup, or Debian's cargo)" >&2; exit 1; }

go mod download github.com/daulet/tokenizers
mod_dir=$(go list -m -f '{{.Dir}}' github.com/daulet/tokenizers)
mod_version=$(go list -m -f '{{.Version}}' github.com/daulet/tokenizers)
[ -f "$mod_dir/Cargo.toml" ] || { echo "hftokenizers: $mod_dir has no Cargo.toml" >&2; exit 1; }

src=$OUT/crate
rm -rf "$src"
mkdir -p "$src"
cp -r "$mod_dir/src" "$src/"
# The edited manifest: tiktoken-rs from crates.io; no dev-dependencies or benches.
awk -v tk="$TIKTOKEN_RS" '
  /^\[/ { skip = ($0 == "[dev-dependencies]" || $0 == "[[bench]]") }
  skip { next }
  /^tiktoken-rs *=/ { print "tiktoken-rs = \"" tk "\""; next }
  { print }
' "$mod_dir/Cargo.toml" > "$src/Cargo.toml"
grep -q "^tiktoken-rs = \"$TIKTOKEN_RS\"" "$src/Cargo.toml" || { echo "hftokenizers: $mod_dir/Cargo.toml has no tiktoken-rs line to replace" >&2; exit 1; }
chmod -R u+w "$src"

if $relock; then
  cp "$mod_dir/Cargo.lock" "$src/Cargo.lock"
  chmod u+w "$src/Cargo.lock"
  (cd "$src" && cargo fetch)  # resolves only what changed; every other pin stays
  cp "$src/Cargo.lock" "$HERE/Cargo.lock"
  echo "hftokenizers: wrote $HERE/Cargo.lock"
fi
cp "$HERE/Cargo.lock" "$src/Cargo.lock"

stamp=$( { echo "$mod_version"; cat "$src/Cargo.toml" "$HERE/Cargo.lock" "$0"; } | sha256sum | cut -d' ' -f1)
cache=${HFTOKENIZERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/posttrain/hftokenizers}/$stamp
if [ -f "$OUT/libtokenizers.a" ] && [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "hftokenizers: $OUT/libtokenizers.a is up to date (daulet/tokenizers $mod_version)"
  exit 0
fi
if [ -f "$cache/libtokenizers.a" ]; then
  cp "$cache/libtokenizers.a" "$OUT/libtokenizers.a"
  echo "$stamp" > "$OUT/stamp"
  echo "hftokenizers: $OUT/libtokenizers.a from the cache $cache (daulet/tokenizers $mod_version)"
  exit 0
fi
start=$(date +%s)
(cd "$src" && CARGO_TARGET_DIR="$PWD/../target" cargo build --release --locked --lib)
cp "$OUT/target/release/libtokenizers.a" "$OUT/libtokenizers.a"
echo "$stamp" > "$OUT/stamp"
mkdir -p "$cache" && cp "$OUT/libtokenizers.a" "$cache/libtokenizers.a.tmp" && mv "$cache/libtokenizers.a.tmp" "$cache/libtokenizers.a"
echo "hftokenizers: built $OUT/libtokenizers.a for daulet/tokenizers $mod_version in $(( $(date +%s) - start )) s"
