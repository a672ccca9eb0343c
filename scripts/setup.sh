#!/usr/bin/env bash
# Installs everything uxsched needs on a fresh Debian machine (run as root, or with sudo available).
# Idempotent: does nothing that is already done. Used by `make demo` and `make test`.
set -euo pipefail

# Debian packages: the real tools the harness and tests drive (rt-app examples for the workload
# reader, stress-ng/hackbench/fio as background loads, Xvfb/xdotool for the X11 focus source,
# xterm, xedit (x11-apps), openbox and xterm's fonts (xfonts-base) for the real-application
# scenarios, clang/libbpf for the BPF tracker, sqlite is bundled by rusqlite; QEMU and a static
# busybox boot the test guest of crates/guest, a pure cgroup2 kernel from ../shared/kernels/;
# dbus-daemon runs the private bus of the fake systemd in crates/daemon/tests/systemd_unit.rs; the
# kernel source (~150 MB, a 25 s download here) and its build tools for the `kbuild` load: the
# field's standard compile); a Java 17 JDK and Maven build and test the Java client (java/).
PKGS=(build-essential pkg-config curl ca-certificates rt-app rt-tests stress-ng fio
      xvfb x11-utils xdotool clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool util-linux procps
      fonts-dejavu-core qemu-system-x86 busybox-static dbus-daemon
      linux-source-6.12 flex bison bc libssl-dev
      xterm x11-apps openbox xfonts-base valgrind openjdk-17-jdk-headless maven)

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

# Rust toolchain (rustup) if cargo is absent.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "setup: installing the Rust toolchain with rustup" >&2
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
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
