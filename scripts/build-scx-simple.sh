#!/usr/bin/env bash
# Build the kernel's example sched_ext scheduler, scx_simple, from Debian's linux-source-6.12
# (tools/sched_ext), with the toolchain our own BPF uses: the BPF object with clang >= 16 (the
# system clang if new enough, else PyPI's ziglang, installed by scripts/setup.sh), the loader
# with gcc against 6.12's own libbpf and a bootstrap bpftool built from the same tree (bookworm's
# libbpf 1.1 predates the `.struct_ops.link` section scx_simple uses).
#
# Usage: scripts/build-scx-simple.sh [OUT]   (default OUT: target/scx-simple)
# Prints the path of the binary. Reuses OUT's builds when they are there.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-target/scx-simple}")
TARBALL=/usr/src/linux-source-6.12.tar.xz
VMLINUX_H=${UXSCHED_VMLINUX_H:-../shared/kernels/vmlinux-6.12-scx.h}
[ -r "$TARBALL" ] || { echo "build-scx-simple: $TARBALL is missing: apt-get install linux-source-6.12 (scripts/setup.sh does)" >&2; exit 1; }
[ -r "$VMLINUX_H" ] || { echo "build-scx-simple: $VMLINUX_H is missing: set UXSCHED_VMLINUX_H to the 6.12 test kernel's vmlinux.h (tools/scx-kernel/build.sh makes one)" >&2; exit 1; }
VMLINUX_H=$(realpath "$VMLINUX_H")
if [ -x "$OUT/scx_simple" ]; then echo "$OUT/scx_simple"; exit 0; fi
mkdir -p "$OUT"
SRC=$OUT/src/linux-source-6.12
if [ ! -d "$SRC/tools/sched_ext" ]; then
  mkdir -p "$OUT/src"
  tar -xJf "$TARBALL" -C "$OUT/src" --wildcards 'linux-source-6.12/tools/*' \
    'linux-source-6.12/scripts/*' 'linux-source-6.12/include/*' 'linux-source-6.12/kernel/bpf/*' \
    'linux-source-6.12/arch/x86/include/*' 'linux-source-6.12/Makefile'
fi

# clang >= 16 for BPF, as crates/scx/build.rs chooses it.
bpf_cc() {
  if [ -n "${CLANG:-}" ]; then "$CLANG" -target bpf "$@"; return; fi
  local v; v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
  if [ "${v:-0}" -ge 16 ]; then clang -target bpf "$@"; return; fi
  python3 -m ziglang cc -target bpfel-freestanding-none -fno-unwind-tables \
    -fno-asynchronous-unwind-tables -fno-sanitize=all "$@"
}

# 6.12's libbpf (static, with headers) and a bootstrap bpftool for the skeleton.
LIBBPF=$OUT/libbpf
if [ ! -f "$LIBBPF/usr/lib64/libbpf.a" ] && [ ! -f "$LIBBPF/usr/lib/libbpf.a" ]; then
  mkdir -p "$OUT/libbpf-build"
  make -s -C "$SRC/tools/lib/bpf" OUTPUT="$OUT/libbpf-build/" DESTDIR="$LIBBPF" prefix=/usr \
    -j"$(nproc)" install_headers install_pkgconfig "$OUT/libbpf-build/libbpf.a" >/dev/null
  install -D -m 644 "$OUT/libbpf-build/libbpf.a" "$LIBBPF/usr/lib/libbpf.a"
fi
BPFTOOL=$OUT/bpftool-build/bootstrap/bpftool
if [ ! -x "$BPFTOOL" ]; then
  mkdir -p "$OUT/bpftool-build"
  make -s -C "$SRC/tools/bpf/bpftool" OUTPUT="$OUT/bpftool-build/" -j"$(nproc)" bootstrap >/dev/null
fi

SE=$SRC/tools/sched_ext
INC=$OUT/include
mkdir -p "$INC"
cp "$VMLINUX_H" "$INC/vmlinux.h"
bpf_cc -g -O2 -mcpu=v3 -Wall -Wno-macro-redefined -D__TARGET_ARCH_x86 \
  -I"$INC" -I"$SE/include" -I"$SE/include/bpf-compat" -I"$LIBBPF/usr/include" \
  -idirafter/usr/include -c "$SE/scx_simple.bpf.c" -o "$OUT/scx_simple.bpf.o"
"$BPFTOOL" gen object "$OUT/scx_simple.linked.o" "$OUT/scx_simple.bpf.o"
"$BPFTOOL" gen skeleton "$OUT/scx_simple.linked.o" name scx_simple >"$INC/scx_simple.bpf.skel.h"
gcc -O2 -g -I"$INC" -I"$SE/include" -I"$LIBBPF/usr/include" -I"$SRC/tools/include/uapi" \
  "$SE/scx_simple.c" -o "$OUT/scx_simple.tmp" \
  "$(ls "$LIBBPF"/usr/lib*/libbpf.a | head -1)" -lelf -lz
mv "$OUT/scx_simple.tmp" "$OUT/scx_simple"
echo "$OUT/scx_simple"
