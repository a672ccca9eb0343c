#!/usr/bin/env bash
# Builds the sched_ext test kernel of shared/kernels/ from Debian's linux-source-6.12, with the
# recipe of shared/kernels/README.md: for machines without shared/ (the guest tests and
# `uxsched scx` need a Linux >= 6.12 with CONFIG_SCHED_CLASS_EXT).
#
#   tools/scx-kernel/build.sh [--config-only] [--autogroup] [OUT_DIR]
#
# OUT_DIR (default ~/.cache/uxsched/scx-kernel) receives bzImage-6.12-scx, config-6.12-scx and
# vmlinux-6.12-scx.h (bpftool's dump of its BTF); the source tree is unpacked under
# OUT_DIR/src. --config-only stops after the configuration (seconds, not the ~14 minutes of
# `make bzImage` on a 2-core machine). --autogroup adds CONFIG_SCHED_AUTOGROUP, which the shared
# image lacks, so that the harness's `same-session` layout can run in the guest (its output is
# otherwise the same files: give it an OUT_DIR of its own). Then run the guest tests with
#   UXSCHED_GUEST_KERNEL=OUT_DIR/bzImage-6.12-scx
# Packages (scripts/setup.sh installs them): linux-source-6.12 bc bison flex libelf-dev
# libssl-dev dwarves cpio bpftool, and a C compiler.
set -euo pipefail

config_only=0 autogroup=0
while [ $# -gt 0 ]; do
  case $1 in
    --config-only) config_only=1; shift ;;
    --autogroup) autogroup=1; shift ;;
    *) break ;;
  esac
done
out=${1:-$HOME/.cache/uxsched/scx-kernel}
tarball=/usr/src/linux-source-6.12.tar.xz
jobs=${JOBS:-$(( $(nproc) + 1 ))}

die() { echo "scx-kernel: $*" >&2; exit 1; }
[ -f "$tarball" ] || die "$tarball is missing: install the Debian package linux-source-6.12 (bash scripts/setup.sh)"
for tool in make gcc bc bison flex pahole cpio; do
  command -v "$tool" >/dev/null || die "$tool is missing: install bc bison flex libelf-dev libssl-dev dwarves cpio build-essential"
done

mkdir -p "$out/src"
src="$out/src/linux-source-6.12"
if [ ! -f "$src/Makefile" ]; then
  echo "scx-kernel: unpacking $tarball into $out/src" >&2
  tar -xJf "$tarball" -C "$out/src"
fi
cd "$src"

# The configuration: a KVM-style guest with BPF, BTF and sched_ext, no modules (HZ=1000).
make -s defconfig
make -s kvm_guest.config
scripts/config -e BPF -e BPF_SYSCALL -e BPF_JIT -e BPF_JIT_ALWAYS_ON -e DEBUG_INFO \
  -e DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT -e DEBUG_INFO_BTF -e SCHED_CLASS_EXT -e FTRACE \
  -e FUNCTION_TRACER -e DYNAMIC_FTRACE -e SCHED_DEBUG -e CGROUPS -e CGROUP_SCHED \
  -e FAIR_GROUP_SCHED -e BPF_EVENTS -e PAHOLE_HAS_SPLIT_BTF -d DEBUG_INFO_REDUCED -d MODULES
if [ "$autogroup" = 1 ]; then scripts/config -e SCHED_AUTOGROUP; fi
make -s olddefconfig
want=(CONFIG_SCHED_CLASS_EXT CONFIG_DEBUG_INFO_BTF CONFIG_BPF_SYSCALL)
if [ "$autogroup" = 1 ]; then want+=(CONFIG_SCHED_AUTOGROUP); fi
for opt in "${want[@]}"; do
  grep -qx "$opt=y" .config || die "$opt is not set after olddefconfig (a missing dependency: see .config)"
done
cp .config "$out/config-6.12-scx"
echo "scx-kernel: configured ($out/config-6.12-scx: sched_ext, BTF, HZ=$(sed -n 's/^CONFIG_HZ=//p' .config))" >&2
if [ "$config_only" = 1 ]; then exit 0; fi

make -j"$jobs" bzImage
cp arch/x86/boot/bzImage "$out/bzImage-6.12-scx"
bpftool btf dump file vmlinux format c > "$out/vmlinux-6.12-scx.h"
echo "scx-kernel: done: UXSCHED_GUEST_KERNEL=$out/bzImage-6.12-scx" >&2
