#!/usr/bin/env bash
# Builds the Debian package of uxsched from an already-built binary, with Debian's own tools
# (dpkg-deb, dpkg-shlibdeps; no download): `make deb`, and crates/uxsched/tests/package.rs.
#
#   scripts/deb.sh [BINARY [OUTDIR]]   # defaults: target/release/uxsched, target/debian
#
# Prints the path of OUTDIR/uxsched_<version>_<arch>.deb. What goes where, and why this script
# rather than cargo-deb: docs/packaging.md. The version is packaging/debian/changelog's, and must
# be the binary's (`uxsched --version`): bump both together.
set -euo pipefail
umask 022

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release/uxsched}
out=${2:-$root/target/debian}
pkg=$root/packaging
deb=$pkg/debian

die() {
  echo "deb.sh: error: $*" >&2
  exit 1
}

for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog strip gzip md5sum python3 rustc "${CARGO:-cargo}"; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool not found (dpkg-dev, binutils, python3, the Rust toolchain: scripts/setup.sh installs them)"
done
[ -x "$bin" ] || die "no binary at $bin: build it first (make build)"

version=$(dpkg-parsechangelog -l "$deb/changelog" -S Version)
bin_version=$("$bin" --version | awk '{print $2}')
[ "$version" = "$bin_version" ] ||
  die "packaging/debian/changelog is at $version but $bin is $bin_version: add a changelog entry"
arch=$(dpkg --print-architecture)
# Every file's time is the changelog entry's: the same sources give the same package.
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$deb/changelog" -S Timestamp)
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps expects a source tree: debian/control, and the files under debian/<package>.
mkdir -p "$work/debian"
printf 'Source: uxsched\n\nPackage: uxsched\nArchitecture: any\n' >"$work/debian/control"
stage=$work/debian/uxsched
doc=$stage/usr/share/doc/uxsched

# The binary stripped as Debian's dh_strip does (debug info, local symbols, .comment, .note):
# 98 -> 15 MB. A backtrace then names no function; the build tree's binary keeps them.
install -d "$stage/usr/bin"
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  -o "$stage/usr/bin/uxsched" "$bin"
chmod 755 "$stage/usr/bin/uxsched"

# The unit (it runs /usr/bin/uxsched with /etc/uxsched/uxsched.toml) and the configuration.
install -D -m 644 "$pkg/uxsched.service" "$stage/usr/lib/systemd/system/uxsched.service"
install -D -m 644 "$pkg/uxsched.toml" "$stage/etc/uxsched/uxsched.toml"

# Every file of packaging/dbus, by kind: bus policies (*.conf) to the system bus's system.d;
# activation files (*.service, [D-BUS Service]) to the system bus's system-services when they
# name the User= to run as (the system bus requires it), else to the session bus's services;
# introspection (*.xml) to interfaces. Anything else stops the build: say here where it goes.
shopt -s nullglob
for f in "$pkg"/dbus/*; do
  name=$(basename "$f")
  case "$name" in
    *.conf) dest=usr/share/dbus-1/system.d ;;
    *.service)
      grep -q '^\[D-BUS Service\]' "$f" || die "packaging/dbus/$name is not a D-Bus activation file"
      if grep -q '^User=' "$f"; then dest=usr/share/dbus-1/system-services; else dest=usr/share/dbus-1/services; fi
      ;;
    *.xml) dest=usr/share/dbus-1/interfaces ;;
    *.md) continue ;;
    *) die "packaging/dbus/$name: scripts/deb.sh does not know where it is installed" ;;
  esac
  install -D -m 644 "$f" "$stage/$dest/$name"
done
shopt -u nullglob

# Man pages from the command line's own definitions (clap_mangen): uxsched.1 and one per
# subcommand, e.g. uxsched-daemon.1, uxsched-sim-run.1.
"$bin" manpages "$work/man"
install -d "$stage/usr/share/man/man1"
for page in "$work"/man/*.1; do
  install -m 644 "$page" "$stage/usr/share/man/man1/"
done
gzip -9n "$stage"/usr/share/man/man1/*.1

# Documentation: copyright, changelog (a native package's: changelog.gz) and the page the
# unit's Documentation= names.
install -D -m 644 "$deb/copyright" "$doc/copyright"
# ...and the crates.io crates linked into the binary (normal dependencies of uxsched, for this
# host), each with its license, from Cargo's own metadata (offline: the lock file's versions).
host=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$host" ] || die "rustc -vV names no host triple"
(cd "$root" && "${CARGO:-cargo}" metadata --offline --locked --format-version 1 --filter-platform "$host") |
  python3 -c '
import json, sys
meta = json.load(sys.stdin)
packages = {p["id"]: p for p in meta["packages"]}
deps = {n["id"]: n["deps"] for n in meta["resolve"]["nodes"]}
root = next(i for i, p in packages.items() if p["name"] == "uxsched" and p["source"] is None)
seen, todo = set(), [root]
while todo:
    i = todo.pop()
    if i not in seen:
        seen.add(i)
        todo += [d["pkg"] for d in deps[i] if any(k["kind"] is None for k in d["dep_kinds"])]
crates = sorted((packages[i]["name"], packages[i]["version"], packages[i]["license"] or "see the crate")
                for i in seen if packages[i]["source"])
print()
print("Files: usr/bin/uxsched")
print("Copyright: 2026 the uxsched authors; the crates below: their authors")
print("License: GPL-2")
print("Comment: The binary also holds these Rust crates from crates.io, each under its own")
print(" license (and C code in two: libsqlite3-sys bundles SQLite, public domain; libbpf-sys")
print(" bundles libbpf, LGPL-2.1 OR BSD-2-Clause):")
for name, version, lic in crates:
    print(f" {name} {version}: {lic}")
' >>"$doc/copyright"
install -m 644 "$deb/changelog" "$doc/changelog"
gzip -9n "$doc/changelog"
install -m 644 "$root/docs/daemon.md" "$doc/daemon.md"
grep -q '^Documentation=file:///usr/share/doc/uxsched/daemon.md$' "$pkg/uxsched.service" ||
  die "the unit's Documentation= no longer names /usr/share/doc/uxsched/daemon.md: update this script"

# Control area. Maintainer scripts: preinst and postrm get a dpkg-divert for each file of
# packaging/debian/diversions that the package ships (another package's file it replaces).
install -d "$stage/DEBIAN"
add=$work/divert-add
remove=$work/divert-remove
: >"$add"
: >"$remove"
while read -r path to; do
  case "$path" in '' | '#'*) continue ;; esac
  [ -n "$to" ] || die "packaging/debian/diversions: $path: where does the other package's file go?"
  [ -f "$stage$path" ] || continue
  printf '\tdpkg-divert --package uxsched --add --rename --divert %s %s >/dev/null\n' "$to" "$path" >>"$add"
  printf '\tdpkg-divert --package uxsched --remove --rename --divert %s %s >/dev/null\n' "$to" "$path" >>"$remove"
done <"$deb/diversions"
for script in preinst postinst prerm postrm; do
  # A line that is only the placeholder becomes the diversions (or nothing).
  awk -v add="$add" -v remove="$remove" '
    function cat(f,   l) { while ((getline l < f) > 0) print l; close(f) }
    $0 == "#DIVERT_ADD#" { cat(add); next }
    $0 == "#DIVERT_REMOVE#" { cat(remove); next }
    { print }' "$deb/$script" >"$stage/DEBIAN/$script"
  chmod 755 "$stage/DEBIAN/$script"
  sh -n "$stage/DEBIAN/$script" || die "DEBIAN/$script is not valid sh"
done
(cd "$stage" && find etc -type f | sort | sed 's|^|/|') >"$stage/DEBIAN/conffiles"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
# Depends: the packages of the shared libraries the binary links (libc6, libgcc-s1, libelf1,
# zlib1g), at the versions its symbols need.
depends=$(cd "$work" && dpkg-shlibdeps -O debian/uxsched/usr/bin/uxsched |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependency of the binary"
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
{
  sed -n '/^Description:/q;p' "$deb/control"
  echo "Version: $version"
  echo "Architecture: $arch"
  echo "Installed-Size: $installed_size"
  echo "Depends: $depends"
  # The KWin source runs dbus-send and dbus-monitor as the session's user (docs/compositors.md).
  echo "Recommends: dbus-bin"
  sed -n '/^Description:/,$p' "$deb/control"
} >"$stage/DEBIAN/control"

find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
find "$stage" -type d -exec chmod 755 {} +
mkdir -p "$out"
file=$out/uxsched_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$file" >/dev/null
echo "$file"
