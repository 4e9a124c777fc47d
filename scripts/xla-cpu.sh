#!/usr/bin/env bash
# Installs a pinned XLA CPU PJRT plugin from PyPI as bin/xla/pjrt_c_api_cpu_plugin.so, where
# posttrain finds it by name (--backend xla:cpu). `make xla-cpu` runs it. docs/xla.md says why this
# wheel and what the others did.
#
#   scripts/xla-cpu.sh [CANDIDATE]   CANDIDATE: lammps (default, the pin), xla-cpu-pjrt, fastatomstruct
#
# Idempotent: a plugin already in place with the pinned sha256 is left alone, with no download.
# Otherwise exactly this runs, and the wheel and the .so must match the sha256 below:
#   pip download --no-deps PKG==VERSION -d TMP
#   (extract MEMBER from the wheel)
# A mismatch, or any failure, is one line on stderr, a non-zero exit, and nothing written.
# Variables: XLA_CPU_DIR (default bin/xla) where to install; XLA_CPU_WHEEL a wheel file already on
# disk to install instead of downloading it (checked the same way); PYTHON (default python3).
set -euo pipefail

candidate=${1:-lammps}
case "$candidate" in
lammps) # the pin: PJRT C API 0.115, XLA of jax 0.11.2, Apache-2.0
	pkg=lammps-jax-pjrt-cpu version=0.11.2
	wheel=lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl
	wheel_sha256=1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1
	member=lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so
	so_sha256=ad1309ac822b1b24d51b7f9947c7c9fa9ef5d67f390584cbc3d1fa2428fed9c2 ;;
xla-cpu-pjrt) # PJRT C API 0.81, OpenXLA's own, no licence in the wheel
	pkg=xla-cpu-pjrt version=0.0.1
	wheel=xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl
	wheel_sha256=55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc
	member=xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
	so_sha256=88c3f28c5900f48ad4a82cab9e79bba9537809743395e341485f8794268820dc ;;
fastatomstruct) # PJRT C API 0.106, zml/pjrt-artifacts build manual-2026-06-23T00-20-00Z
	pkg=fastatomstruct-xla-cpu version=2026.6.23
	wheel=fastatomstruct_xla_cpu-2026.6.23-py3-none-manylinux_2_27_x86_64.whl
	wheel_sha256=88b1c430b341b4bea40a37420311c9c75db6e22b46d2ff95b6986577bee6afe9
	member=fastatomstruct_xla_cpu/libpjrt_cpu.so
	so_sha256=0a0fe56ca17be9efc7b942e89e534e5e0ad4a0f1e369b66d27b62184509015b9 ;;
*)
	echo "xla-cpu: unknown candidate \"$candidate\" (lammps, xla-cpu-pjrt, fastatomstruct)" >&2
	exit 2 ;;
esac

dest=${XLA_CPU_DIR:-bin/xla}
target=$dest/pjrt_c_api_cpu_plugin.so
python=${PYTHON:-python3}

die() {
	echo "xla-cpu: $*" >&2
	exit 1
}
sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$target" ] && [ "$(sha256 "$target")" = "$so_sha256" ]; then
	echo "xla-cpu: $target is $pkg $version's plugin (sha256 $so_sha256), nothing to do"
	exit 0
fi
arch=$(uname -m)
[ "$arch" = x86_64 ] || die "$pkg $version is pinned for x86_64 (manylinux_2_27); this machine is $arch"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${XLA_CPU_WHEEL:-}" ]; then
	got=$XLA_CPU_WHEEL
	[ -f "$got" ] || die "$got: no such wheel file"
else
	"$python" -m pip download --no-deps --disable-pip-version-check -q "$pkg==$version" -d "$tmp" >"$tmp/pip.log" 2>&1 ||
		die "pip download --no-deps $pkg==$version failed: $(tail -n 1 "$tmp/pip.log")"
	got=$tmp/$wheel
	[ -f "$got" ] || die "pip download --no-deps $pkg==$version did not give $wheel (got: $(cd "$tmp" && ls -- *.whl 2>/dev/null | tr '\n' ' '))"
fi
sum=$(sha256 "$got")
[ "$sum" = "$wheel_sha256" ] || die "$got: sha256 $sum, want $wheel_sha256 ($pkg $version); nothing installed"

"$python" - "$got" "$member" "$tmp/plugin.so" <<'EOF' || die "$got: cannot extract $member"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
sum=$(sha256 "$tmp/plugin.so")
[ "$sum" = "$so_sha256" ] || die "$member in $got: sha256 $sum, want $so_sha256; nothing installed"

mkdir -p "$dest"
chmod 0755 "$tmp/plugin.so"
cp "$tmp/plugin.so" "$target.partial"
mv -f "$target.partial" "$target"
echo "xla-cpu: installed $pkg $version's plugin as $target (sha256 $so_sha256)"
