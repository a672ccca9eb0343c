#!/usr/bin/env bash
# Installs everything uxsched needs on a fresh Debian machine (run as root, or with sudo available).
# Idempotent: does nothing that is already done. Used by `make demo` and `make test`.
set -euo pipefail

# Debian packages: the real tools the harness and tests drive (rt-app examples for the workload
# reader, stress-ng/hackbench/fio as background loads, Xvfb/xdotool for the X11 focus source,
# xterm, xedit (x11-apps), openbox and xterm's fonts (xfonts-base) for the real-application
# scenarios, clang/libbpf for the BPF tracker, sqlite is bundled by rusqlite; QEMU and a static
# busybox boot the test guest of crates/guest, a pure cgroup2 kernel from ../shared/kernels/;
# dbus-daemon runs the private bus of the fake systemd in crates/daemon/tests/systemd_unit.rs and
# of the rtkit interface's tests (crates/daemon/tests/rtkit.rs, with busctl from systemd and
# dbus-send from dbus-bin as clients); the
# kernel source (~150 MB, a 25 s download here) and its build tools for the `kbuild` load: the
# field's standard compile; the same source gives crates/scx its sched_ext headers, and with
# dwarves (pahole, for BTF) and cpio tools/scx-kernel/build.sh builds the sched_ext test kernel);
# a Java 17 JDK and Maven build and test the Java client (java/); chromium is the browser of the
# `chromium` scenario (a real browser typed into; it runs as the system user uxsched-bench, which
# the harness creates with useradd on first use).
PKGS=(build-essential pkg-config curl ca-certificates rt-app rt-tests stress-ng fio
      xvfb x11-utils xdotool clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool util-linux procps
      fonts-dejavu-core qemu-system-x86 busybox-static dbus-daemon
      linux-source-6.12 flex bison bc libssl-dev dwarves cpio python3-pip
      xterm x11-apps openbox xfonts-base valgrind systemd dbus-bin
      openjdk-17-jdk-headless maven
      chromium)

# `make deb` (scripts/deb.sh) and its test (crates/uxsched/tests/package.rs): dpkg-dev
# (dpkg-shlibdeps, dpkg-parsechangelog), binutils (strip), init-system-helpers (deb-systemd-helper,
# which the maintainer scripts call), groff-base and man-db (the man pages rendered), lintian
# (Debian's package checker).
PKGS+=(dpkg-dev binutils init-system-helpers groff-base man-db lintian)

# The desktop sources' tests (issue 32): gamemode (gamemoderun, gamemode-simulate-game: GameMode's
# own clients against the daemon's GameMode service).
PKGS+=(gamemode)
# The Wayland scenario `foot` (crates/bench/src/models/wayland) and the sway source's tests: sway
# (headless) and the foot terminal.
PKGS+=(sway foot)
# The KWin source's test runs KDE's real compositor (kwin_wayland --virtual, with Xwayland).
PKGS+=(kwin-wayland xwayland)
# The tracker's FUSE test (crates/daemon/tests/tracker_fuse.rs, seed 003 §5.2): a real FUSE daemon.
PKGS+=(bindfs fuse3)
# The `launch` scenario (crates/bench/src/models/xapp/launch.rs, issue 33): the GTK 3 program it
# starts cold from a terminal.
PKGS+=(mousepad)
# The audio source (crates/daemon/src/sources/audio: pw-dump) and its test (tests/audio.rs): PipeWire, WirePlumber.
PKGS+=(pipewire pipewire-bin wireplumber)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# rtkit's own clients — rtkitctl and rtkit's installed test program rtkit-test, which asks for
# real time through rtkit's client code — for crates/daemon/tests/rtkit.rs: unpacked from
# Debian's rtkit package into /opt/uxsched/rtkit, not installed, so no rtkit-daemon competes
# for org.freedesktop.RealtimeKit1 and no polkitd is pulled in (their libraries are already
# here: libdbus-1-3, libcap2, libsystemd0).
RTKIT_DIR=/opt/uxsched/rtkit
if [ ! -x "$RTKIT_DIR/usr/libexec/installed-tests/rtkit/rtkit-test" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: unpacking rtkit's clients into $RTKIT_DIR" >&2
  tmp=$(mktemp -d); chmod 755 "$tmp"  # apt downloads as _apt
  (cd "$tmp" && apt-get download rtkit >/dev/null)
  $SUDO mkdir -p "$RTKIT_DIR"
  $SUDO dpkg-deb -x "$tmp"/rtkit_*.deb "$RTKIT_DIR"
  rm -rf "$tmp"
fi

# Debian's own kernel for the storage guest test (crates/uxsched/tests/nvme_guest.rs, issue 33):
# the test kernel in ../shared/kernels/ has no NVMe driver, no BFQ and no memory controller; the
# kernel `linux-image-amd64` points to has them as modules. Only its image and the modules the
# test loads (crates/guest/src/debian.rs reads `load-order`) are kept, in /opt/uxsched/debian-kernel;
# nothing is installed. Redone when `linux-image-amd64` points to another kernel.
DK_DIR=/opt/uxsched/debian-kernel
# In load order: each after what it depends on, and the CRC algorithms before the libraries that
# look them up at load (the guest has no modprobe to fetch them).
DK_MODULES=(crct10dif_common crct10dif_generic crc-t10dif crc64 crc64_rocksoft_generic crc64-rocksoft
  t10-pi nvme-core nvme)
# Kept beside them but not loaded at boot: BFQ, which the guest's modprobe loads when the daemon
# asks for the elevator (as on a Debian machine, where it is a module nobody loaded yet).
DK_ON_DEMAND=(bfq)
dk_pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1)
if [ -z "$dk_pkg" ]; then
  echo "setup: warning: apt knows no linux-image-amd64: the NVMe guest test will say its kernel is missing" >&2
elif [ "$(cat "$DK_DIR/package" 2>/dev/null)" != "$dk_pkg" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: unpacking $dk_pkg's image and storage modules into $DK_DIR" >&2
  tmp=$(mktemp -d); chmod 755 "$tmp"  # apt downloads as _apt
  (cd "$tmp" && apt-get download "$dk_pkg" >/dev/null)
  dpkg-deb -x "$tmp"/"$dk_pkg"_*.deb "$tmp/x"
  $SUDO rm -rf "$DK_DIR"
  $SUDO mkdir -p "$DK_DIR/modules"
  $SUDO cp "$tmp"/x/boot/vmlinuz-* "$DK_DIR/vmlinuz"
  $SUDO cp "$tmp"/x/boot/config-* "$DK_DIR/config"
  for m in "${DK_MODULES[@]}" "${DK_ON_DEMAND[@]}"; do
    f=$(find "$tmp/x/lib/modules" -name "$m.ko" | head -n1)
    [ -n "$f" ] || { echo "setup: error: $dk_pkg has no module $m.ko" >&2; exit 1; }
    $SUDO cp "$f" "$DK_DIR/modules/"
  done
  printf '%s\n' "${DK_MODULES[@]}" | $SUDO tee "$DK_DIR/load-order" >/dev/null
  ls "$tmp/x/lib/modules" | $SUDO tee "$DK_DIR/release" >/dev/null
  echo "$dk_pkg" | $SUDO tee "$DK_DIR/package" >/dev/null
  rm -rf "$tmp"
fi

# Rust toolchain (rustup) if cargo is absent.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "setup: installing the Rust toolchain with rustup" >&2
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
fi

# sched_ext BPF (crates/scx) needs clang >= 16; bookworm ships 14. PyPI's ziglang carries clang 22,
# which crates/scx/build.rs uses when the system clang is older (shared/kernels/README.md).
clang_major=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
if [ "${clang_major:-0}" -lt 16 ] && ! python3 -m ziglang version >/dev/null 2>&1; then
  echo "setup: clang ${clang_major:-none} < 16: installing ziglang (clang 22) from PyPI" >&2
  # A Debian python refuses system-wide pip installs (PEP 668) unless told.
  python3 -m pip install --quiet "ziglang==0.17.1" 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages "ziglang==0.17.1"
fi

# The Java client's Maven dependencies and plugins (java/pom.xml pins them all), fetched once so
# that scripts/test.sh can build and test it offline (`mvn -o`). A marker per pom content.
pom="$(dirname "$0")/../java/pom.xml"
java_marker="$HOME/.m2/uxsched-java-$(sha256sum "$pom" | cut -c1-16)"
if [ ! -f "$java_marker" ]; then
  echo "setup: fetching the Java client's Maven dependencies" >&2
  # Running the daemon-free unit test resolves surefire's JUnit provider too.
  mvn -B -q -f "$pom" test -Dtest=ReplyTest
  mkdir -p "$HOME/.m2" && touch "$java_marker"
fi

# `uxsched sim sweep --ray` (docs/sweep.md) and its tests (crates/uxsched/tests/sim_sweep_ray.rs):
# Ray, and the engine's wheel (python/: PyO3, built by maturin) that every Ray worker imports.
# Rebuilt when the engine's sources change (a marker per their hash): the CLI refuses a stale one.
if ! python3 -c "import ray" >/dev/null 2>&1 || ! python3 -m maturin --version >/dev/null 2>&1; then
  echo "setup: installing Ray and maturin from PyPI" >&2
  python3 -m pip install --quiet "ray==2.60.0" "maturin==1.16.0" 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages "ray==2.60.0" "maturin==1.16.0"
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
engine_hash=$(cd "$root" && find crates/sim/src crates/sim/Cargo.toml crates/model/src crates/model/Cargo.toml \
  crates/simrun python/src python/Cargo.toml python/pyproject.toml python/uxsched_sweep scenarios Cargo.lock \
  -type f -not -name '*.pyc' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
wheel_marker="$HOME/.cache/uxsched/wheel-$engine_hash"
if [ ! -f "$wheel_marker" ] || ! python3 -c "import uxsched_sweep" >/dev/null 2>&1; then
  echo "setup: building the uxsched_sweep wheel (python/) for Ray workers" >&2
  # The engine's dependencies at the versions the binary is built with (python/ is its own workspace).
  cp "$root/Cargo.lock" "$root/python/Cargo.lock"
  rm -f "$root"/target/wheels/uxsched_sweep-*.whl
  PATH="$HOME/.cargo/bin:$PATH" python3 -m maturin build --release --quiet \
    -m "$root/python/Cargo.toml" -o "$root/target/wheels"
  python3 -m pip install --quiet --force-reinstall --no-deps "$root"/target/wheels/uxsched_sweep-*.whl 2>/dev/null ||
    python3 -m pip install --quiet --force-reinstall --no-deps --break-system-packages "$root"/target/wheels/uxsched_sweep-*.whl
  mkdir -p "$(dirname "$wheel_marker")" && touch "$wheel_marker"
fi
