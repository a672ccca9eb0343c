#!/usr/bin/env bash
# Installs the Debian package (`make deb`) on a machine that runs systemd and starts its unit,
# with nothing else there: a minimal Debian root file system with systemd, booted on the test
# kernel (shared/kernels/bzImage-6.12-scx) under QEMU (TCG, 2 CPUs, no network), twice. Inside,
# a oneshot unit runs the checks and prints them on the serial console: at the first boot dpkg -i,
# the unit enabled and started by postinst, its socket, its journal, its process, `uxsched
# status`, then a reboot; at the second the unit started by the boot, the same checks, a focus
# and its restore at `systemctl stop`, again at dpkg -r (prerm), then dpkg -P, and power off.
# This script reads the console, prints a summary and exits 1 if any check failed.
# Benchmark-style (about a minute; root; a download the first time): not part of `make test`.
# docs/packaging.md, "Installed on a systemd machine (QEMU guest)".
#
#   scripts/deb-guest.sh [OUT]    # default OUT: target/deb-guest (console.log, guest.log, summary.txt)
#
# Environment: DEB (the package; default the newest target/debian/uxsched_*.deb, built with
# `make deb` if there is none), UXSCHED_GUEST_KERNEL (the kernel), GUEST_KERNEL=debian (boot
# Debian's own kernel instead, installed in the root file system with its initramfs — it has the
# NVMe driver, BFQ and the memory controller the test kernel lacks — and give the guest an
# emulated NVMe disk for step 3d of scripts/lib/guest-storage.sh, capped at NVME_MBPS MiB/s,
# default 100), TIMEOUT (seconds for the
# guest, default 1200), CACHE (default /var/tmp/uxsched-deb-guest: the root file systems, one
# per package list, built once with mmdebstrap from this machine's apt sources).
set -euo pipefail
umask 022

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/target/deb-guest}
cache=${CACHE:-/var/tmp/uxsched-deb-guest}
timeout_s=${TIMEOUT:-1200}

die() {
  echo "deb-guest.sh: error: $*" >&2
  exit 2
}

[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap builds the root file system as root)"
for tool in qemu-system-x86_64 mkfs.ext4 dpkg-deb sha256sum timeout; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (qemu-system-x86, e2fsprogs, dpkg)"
done
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "deb-guest.sh: installing mmdebstrap (apt)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >/dev/null ||
    die "cannot install mmdebstrap"
fi

# The kernel: as scripts/test.sh and crates/guest find it.
kernel=${UXSCHED_GUEST_KERNEL:-}
if [ -z "$kernel" ]; then
  d=$root
  while :; do
    if [ -f "$d/shared/kernels/bzImage-6.12-scx" ]; then kernel=$d/shared/kernels/bzImage-6.12-scx; break; fi
    [ "$d" = / ] && break
    d=$(dirname "$d")
  done
fi
debian_kernel=no
case "${GUEST_KERNEL:-}" in
  "") [ -n "$kernel" ] && [ -f "$kernel" ] || die "no kernel: set UXSCHED_GUEST_KERNEL or put shared/kernels/bzImage-6.12-scx beside the checkout" ;;
  debian) debian_kernel=yes ;;
  *) die "GUEST_KERNEL=$GUEST_KERNEL: the one choice is debian" ;;
esac

# The package.
deb=${DEB:-}
if [ -z "$deb" ]; then
  deb=$(ls -t "$root"/target/debian/uxsched_*.deb 2>/dev/null | head -n1 || true)
  if [ -z "$deb" ]; then
    (cd "$root" && make deb) || die "make deb failed"
    deb=$(ls -t "$root"/target/debian/uxsched_*.deb | head -n1)
  fi
fi
[ -f "$deb" ] || die "no package at $deb"
if [ -x "$root/target/release/uxsched" ] && [ "$root/target/release/uxsched" -nt "$deb" ]; then
  echo "deb-guest.sh: note: $deb is older than target/release/uxsched (run make deb to test the newer binary)" >&2
fi

# The root file system: systemd as init, the system bus, what the package's Depends and
# Recommends name (so that dpkg -i needs no network), sqlite3 to read the daemon's journal
# after it stopped. Cached by suite and package list (and the recipe's number: bump it when
# the mmdebstrap command changes).
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || die "/etc/os-release names no VERSION_CODENAME"
pkg_deps=$(dpkg-deb -f "$deb" Depends Recommends | sed 's/^[A-Za-z-]*: //' | tr ',|' '\n\n' |
  sed 's/(.*)//; s/[[:space:]]//g; /^$/d')
extra=
[ "$debian_kernel" = yes ] && extra="linux-image-amd64 initramfs-tools"
packages=$(printf '%s\n' systemd systemd-sysv dbus init-system-helpers sqlite3 $pkg_deps $extra | sort -u | paste -sd, -)
key=$(printf 'recipe 1\n%s\n%s\n' "$suite" "$packages" | sha256sum | cut -c1-16)
rootfs=$cache/rootfs-$key
mkdir -p "$cache"
if [ ! -f "$rootfs/.complete" ]; then
  # mmdebstrap takes apt's own source files as mirrors: the mirror this machine is set up for.
  mirrors=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -qE '^[[:space:]]*(deb |Types:.*deb)' "$f" && mirrors+=("$f")
  done
  [ ${#mirrors[@]} -gt 0 ] || die "no apt source file under /etc/apt"
  echo "deb-guest.sh: building the root file system ($suite: $packages) in $rootfs" >&2
  rm -rf "$rootfs" "$rootfs.tmp"
  start=$(date +%s)
  mmdebstrap --quiet --mode=root --variant=minbase --include="$packages" \
    "$suite" "$rootfs.tmp" "${mirrors[@]}" >"$cache/mmdebstrap-$key.log" 2>&1 ||
    die "mmdebstrap failed: $cache/mmdebstrap-$key.log"
  echo "$packages" >"$rootfs.tmp/.packages"
  touch "$rootfs.tmp/.complete"
  mv "$rootfs.tmp" "$rootfs"
  echo "deb-guest.sh: root file system built in $(($(date +%s) - start)) s" >&2
fi

# This run's image: a copy of the cached tree, with the package and the check unit added.
mkdir -p "$out"
work=$(mktemp -d "$cache/run.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
cp -a "$rootfs" "$tree"
rm -f "$tree/.complete" "$tree/.packages"
echo uxsched-guest >"$tree/etc/hostname"
: >"$tree/etc/machine-id"
# Nothing waits for a terminal: no getty on the console (it would also write over the checks).
for unit in serial-getty@ttyS0.service getty@tty1.service; do
  ln -sf /dev/null "$tree/etc/systemd/system/$unit"
done
install -D -m 644 "$root/scripts/lib/guest-storage.sh" "$tree/usr/local/lib/uxsched-guest-storage.sh"
initrd=
if [ "$debian_kernel" = yes ]; then
  image=$(ls "$tree"/boot/vmlinuz-* | head -n1)
  kernel_name=$(basename "$image")
  kernel=$work/vmlinuz initrd=$work/initrd.img
  cp "$image" "$kernel"
  cp "$(ls "$tree"/boot/initrd.img-* | head -n1)" "$initrd"
fi
install -d "$tree/root/deb"
install -m 644 "$deb" "$tree/root/deb/"

cat >"$tree/etc/systemd/system/uxsched-deb-check.service" <<'EOF'
[Unit]
Description=Install the uxsched package and check its unit (scripts/deb-guest.sh)
# After the boot's target: the boot has finished everything else when the checks start.
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/uxsched-deb-check
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=20min
# When the checks end, passed or not: reboot after the first boot, else power off, at once.
ExecStopPost=/usr/local/sbin/uxsched-deb-check end
[Install]
WantedBy=multi-user.target
EOF
ln -s /etc/systemd/system/uxsched-deb-check.service \
  "$tree/etc/systemd/system/multi-user.target.wants/uxsched-deb-check.service"

install -D -m 755 /dev/stdin "$tree/usr/local/sbin/uxsched-deb-check" <<'EOF'
#!/bin/sh
# Runs in the guest (uxsched-deb-check.service), at two boots: the first installs the package
# and checks the unit that postinst started, then reboots; the second checks the unit that the
# boot started, then a focus, stop, remove and purge. Prints `fact key=value` and `check NAME
# pass|fail [detail]` lines, `uxsched-deb-guest reboot` after the first boot and
# `uxsched-deb-guest verdict pass|fail` at the end.
set -u
unit=uxsched
sock=/run/uxsched/uxsched.sock
state_dir=/var/lib/uxsched-deb-check
if [ "${1:-}" = end ]; then # ExecStopPost
	sync
	sleep 2 # journald forwards the last lines to the console
	if [ -e $state_dir/reboot ]; then
		rm -f $state_dir/reboot
		sync
		exec systemctl reboot --force --force
	fi
	exec systemctl poweroff --force --force
fi
mkdir -p $state_dir
boot=$(($(cat $state_dir/boots 2>/dev/null || echo 0) + 1))
echo $boot >$state_dir/boots
fails=$(cat $state_dir/fails 2>/dev/null || echo 0)
fact() { echo "fact $1=$2"; }
pass() { echo "check $1 pass${2:+ $2}"; }
fail() { echo "check $1 fail${2:+ $2}"; fails=$((fails + 1)); }
# check NAME DETAIL COMMAND...: pass when COMMAND succeeds.
check() {
	name=$1 detail=$2
	shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# wait_for SECONDS COMMAND...: poll until COMMAND succeeds, for at most SECONDS (of uptime: each
# poll of `uxsched status` takes about a second under TCG).
wait_for() {
	until=$(awk -v t="$(uptime_s)" -v s="$1" 'BEGIN { print int(t + s) }')
	shift
	while :; do
		"$@" && return 0
		[ "$(cut -d. -f1 /proc/uptime)" -lt "$until" ] || return 1
		sleep 0.2
	done
}
since() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }'; }
mono_s() { # a unit property in microseconds since boot, in seconds
	v=$(systemctl show -p "$2" --value "$1")
	awk -v v="${v:-0}" 'BEGIN { printf "%.1f", v / 1e6 }'
}
is_active() { [ "$(systemctl is-active "$unit")" = active ]; }
not_active() { ! systemctl --quiet is-active "$unit"; }
# A thread's nice, policy and real-time priority (/proc/<pid>/stat: fields 19, 41, 40).
sched_of() { awk '{ print "nice=" $19 ",policy=" $41 ",rtprio=" $40 }' "/proc/$1/stat"; }
json() { uxsched status --json 2>/dev/null | tr -d ' \n'; }
boosted() { json | grep -q '"boosted":\[{'; }
journal_has() { journalctl -b -u "$unit" --no-pager -o cat | grep -q "$1"; }
show() { sed 's/^/  | /'; }

# Seconds since the kernel started: systemd started, the boot's target reached, the checks
# started.
b=boot$boot
fact ${b}_userspace_started_s "$(systemctl show -p UserspaceTimestampMonotonic --value |
	awk '{ printf "%.1f", $1 / 1e6 }')"
fact ${b}_multi_user_target_reached_s "$(mono_s multi-user.target ActiveEnterTimestampMonotonic)"
fact ${b}_checks_started_s "$(uptime_s)"
fact ${b}_failed_units "$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | paste -sd, -)"
check ${b}_system_bus "dbus.service active" systemctl --quiet is-active dbus.service

# The daemon the unit runs: its start line and no warning in this boot's journal, the process,
# `uxsched status`. $1: the checks' prefix.
daemon_checks() {
	p=$1
	wait_for 60 test -S "$sock"
	check ${p}socket "$sock" test -S "$sock"
	wait_for 30 journal_has "uxsched daemon ready"
	check ${p}journal_start_line "'uxsched daemon ready' in journalctl -b -u $unit" journal_has "uxsched daemon ready"
	# A warning in the unit's journal is a part that the unit's sandbox or this machine keeps
	# from working (the first run of this check found the launch watcher's netlink socket
	# refused).
	warns=$(journalctl -b -u "$unit" --no-pager -o cat | grep -cE ' (WARN|ERROR) ')
	check ${p}journal_no_warning "$warns WARN/ERROR lines in journalctl -b -u $unit" [ "$warns" -eq 0 ]

	# The process: the unit's main process is /usr/bin/uxsched daemon, root with the unit's
	# capabilities only, no new privileges, a seccomp filter.
	pid=$(systemctl show -p MainPID --value $unit)
	fact ${p}main_pid "$pid"
	exe=$(readlink /proc/$pid/exe)
	check ${p}main_exe "$exe" test "$exe" = /usr/bin/uxsched
	cmd=$(tr '\0' ' ' </proc/$pid/cmdline)
	check ${p}main_cmdline "$cmd" test "$cmd" = "/usr/bin/uxsched daemon --config /etc/uxsched/uxsched.toml "
	fact ${p}main_cgroup "$(cut -d: -f3 /proc/$pid/cgroup)"
	check ${p}runs_as_root "Uid $(st Uid)" [ "$(st Uid)" = 0 ]
	# CAP_DAC_OVERRIDE..CAP_BPF as the unit names them: bits 1 2 6 7 12 19 23 38 39.
	check ${p}capabilities "CapEff=$(st CapEff) CapBnd=$(st CapBnd): the unit's nine" \
		sh -c "[ '$(st CapEff)' = 000000c0008810c6 ] && [ '$(st CapBnd)' = 000000c0008810c6 ]"
	check ${p}no_new_privs "NoNewPrivs $(st NoNewPrivs)" [ "$(st NoNewPrivs)" = 1 ]
	check ${p}seccomp "Seccomp $(st Seccomp)" [ "$(st Seccomp)" = 2 ]

	# `uxsched status` answers (as root, and as a user: anyone may read it); every source runs.
	uxsched status >/tmp/status.txt 2>&1
	rc=$?
	show </tmp/status.txt
	check ${p}status "rc=$rc" [ "$rc" -eq 0 ]
	check ${p}status_as_nobody "setpriv --reuid=nobody" \
		setpriv --reuid=65534 --regid=65534 --clear-groups uxsched status >/dev/null 2>&1
	check ${p}status_daemon_pid "daemon_pid $pid in status --json" sh -c "uxsched status --json | tr -d ' \n' | grep -q '\"daemon_pid\":$pid[,}]'"
	srcs=$(json | grep -o '"sources":\[[^]]*\]')
	echo "  | status --json: $srcs"
	check ${p}sources_alive "no source down or in error" sh -c "! echo '$srcs' | grep -qE '\"alive\":false|\"error\"'"
	sleep 3
	check ${p}still_active_3s "NRestarts=$(systemctl show -p NRestarts --value $unit)" \
		sh -c "systemctl --quiet is-active $unit && [ \"\$(systemctl show -p NRestarts --value $unit)\" = 0 ]"
}
st() { awk -v k="$1:" '$1 == k { print $2 }' /proc/$pid/status; }

if [ "$boot" = 1 ]; then
fact kernel "$(uname -r)"
fact systemd "$(systemctl --version | head -n1 | tr ' ' _)"
fact cgroup_fs "$(stat -fc %T /sys/fs/cgroup)"
deb=$(ls /root/deb/*.deb)
fact package "$(basename "$deb")"
nics=$(for i in /sys/class/net/*; do [ -e "$i/device" ] && basename "$i"; done | paste -sd, -)
check network_absent "network devices: ${nics:-none} (the install is offline)" [ -z "$nics" ]

# 1. Install. postinst enables the unit and, systemd being PID 1, starts it.
t0=$(uptime_s)
dpkg -i "$deb" >/tmp/dpkg-i.log 2>&1
rc=$?
fact dpkg_i_seconds "$(since "$t0")"
show </tmp/dpkg-i.log
check dpkg_i "rc=$rc" [ "$rc" -eq 0 ]
check installed "$(dpkg-query -W -f '${db:Status-Abbrev}' uxsched 2>&1)" \
	sh -c '[ "$(dpkg-query -W -f "\${db:Status-Status}" uxsched)" = installed ]'
en=$(systemctl is-enabled $unit 2>&1)
check is_enabled "$en" test "$en" = enabled
check wanted_by_multi_user "/etc/systemd/system/multi-user.target.wants/$unit.service" \
	test -L /etc/systemd/system/multi-user.target.wants/$unit.service
wait_for 30 is_active
check is_active "$(systemctl is-active $unit)" is_active
wait_for 60 test -S "$sock"
fact socket_after_install_s "$(since "$t0")"
daemon_checks ""
fact checks_failed_boot1 "$fails"
echo "$fails" >$state_dir/fails
touch $state_dir/reboot
echo "uxsched-deb-guest reboot"
exit 0
fi

# 2. The second boot: the enabled unit was started by the boot itself.
check boot2_started_by_boot "active, NRestarts=$(systemctl show -p NRestarts --value $unit)" wait_for 60 is_active
fact boot2_uxsched_active_s "$(mono_s $unit ActiveEnterTimestampMonotonic)"
fact boot2_uxsched_after "$(systemctl show -p After --value $unit)"
daemon_checks boot2_

# 3. A focus, and its restore when the unit stops: a service of user nobody in front; its
# unit's CPUWeight and its scheduling before, focused, after `systemctl stop`.
systemd-run --quiet --unit=uxsched-probe -p User=nobody sleep 100000
wait_for 10 sh -c '[ "$(systemctl show -p MainPID --value uxsched-probe)" -gt 0 ]'
probe=$(systemctl show -p MainPID --value uxsched-probe)
state() { echo "CPUWeight=$(systemctl show -p CPUWeight --value uxsched-probe),$(sched_of "$probe")"; }
s0=$(state)
fact probe_before "$s0"
uxsched focus "$probe" >/tmp/focus.txt 2>&1
rc=$?
show </tmp/focus.txt
check focus "uxsched focus $probe rc=$rc" [ "$rc" -eq 0 ]
wait_for 30 boosted
check boosted "status --json lists boosted threads" boosted
s1=$(state)
fact probe_focused "$s1"
check boost_applied "$s0 -> $s1" [ "$s1" != "$s0" ]
uxsched status | show
echo "  | status --json: $(json | grep -o '"boosted":\[.*\],"sources"')"
grep -E '^(policy|prio|se\.slice)' "/proc/$probe/sched" | show

t0=$(uptime_s)
systemctl stop $unit
rc=$?
fact stop_seconds "$(since "$t0")"
check stop "systemctl stop rc=$rc" [ "$rc" -eq 0 ]
check stopped_inactive "$(systemctl is-active $unit)" sh -c "[ \"\$(systemctl is-active $unit)\" = inactive ]"
check stop_clean_exit "Result=$(systemctl show -p Result --value $unit) status=$(systemctl show -p ExecMainStatus --value $unit)" \
	sh -c "[ \"\$(systemctl show -p Result --value $unit)\" = success ]"
check journal_restore_line "'restoring everything' in journalctl -u $unit" journal_has "restoring everything"
s2=$(state)
fact probe_after_stop "$s2"
check restored "$s1 -> $s2 (was $s0)" [ "$s2" = "$s0" ]
j=/run/uxsched/journal.sqlite
rows=$(sqlite3 "$j" 'SELECT count(*) FROM settings' 2>&1)
fact journal_rows_after_stop "$rows"
check journal_empty "$j: $rows rows (kept by RuntimeDirectoryPreserve=yes)" [ "$rows" = 0 ]

# 3b. The storage levers on this systemd: with `front_unit_io_weight = 500` the probe's unit
# IOWeight is raised through systemd while focused (systemd writes io.weight), and after a
# SIGKILL the restart (Restart=on-failure) puts it back before anything else; with
# `switch_to_iocost = true` blk-iocost is on for the disk while the daemon runs, and off after.
conf=/etc/uxsched/uxsched.toml
sed -i 's/^front_unit_io_weight = 0$/front_unit_io_weight = 500/' $conf
sed -i 's/^switch_to_iocost = false$/switch_to_iocost = true/' $conf
check io_conf "$(grep '^front_unit_io_weight' $conf)" grep -q '^front_unit_io_weight = 500$' $conf
vda=$(cat /sys/block/vda/dev)
iocost() { grep "^$vda " /sys/fs/cgroup/io.cost.qos | cut -d' ' -f2; }
fact iocost_before "$(iocost)"
io_of() { systemctl show -p IOWeight --value uxsched-probe; }
io_file=/sys/fs/cgroup/system.slice/uxsched-probe.service/io.weight
i0=$(io_of)
fact probe_io_before "$i0"
systemctl start $unit
wait_for 60 sh -c "uxsched status >/dev/null 2>&1"
uxsched focus "$probe" >/dev/null 2>&1
wait_for 30 sh -c '[ "$(systemctl show -p IOWeight --value uxsched-probe)" = 500 ]'
fact probe_io_focused "$(io_of); $(cat $io_file 2>&1 | head -1)"
check io_weight_raised "IOWeight $i0 -> $(io_of)" [ "$(io_of)" = 500 ]
check io_weight_file "$io_file: $(head -1 $io_file 2>&1)" sh -c "head -1 $io_file | grep -qx 'default 500'"
check iocost_enabled "vda ($vda): $(iocost)" [ "$(iocost)" = enable=1 ]
pid0=$(systemctl show -p MainPID --value $unit)
systemctl kill -s KILL $unit
wait_for 60 sh -c "[ \"\$(systemctl show -p MainPID --value $unit)\" != $pid0 ] && uxsched status >/dev/null 2>&1"
fact restarts_after_kill "$(systemctl show -p NRestarts --value $unit)"
wait_for 30 sh -c "[ \"\$(systemctl show -p IOWeight --value uxsched-probe)\" = \"$i0\" ]"
check io_weight_restored_after_kill "IOWeight after the restart: $(io_of) (was $i0)" [ "$(io_of)" = "$i0" ]
check iocost_after_kill "vda: $(iocost) (the successor disabled it, then enabled it again)" [ "$(iocost)" = enable=1 ]
systemctl stop $unit
check iocost_disabled_at_stop "vda: $(iocost)" [ "$(iocost)" = enable=0 ]

# 3c, 3d: measurements (scripts/lib/guest-storage.sh).
. /usr/local/lib/uxsched-guest-storage.sh

# 4. Removal: started and focused again, `dpkg -r` (prerm stops it) must restore the same way.
systemctl start $unit
wait_for 60 sh -c "uxsched status >/dev/null 2>&1"
uxsched focus "$probe" >/dev/null 2>&1
wait_for 30 boosted
s3=$(state)
fact probe_focused_again "$s3"
check boost_applied_again "$s0 -> $s3" [ "$s3" != "$s0" ]
dpkg -r uxsched >/tmp/dpkg-r.log 2>&1
rc=$?
show </tmp/dpkg-r.log
check dpkg_r "rc=$rc" [ "$rc" -eq 0 ]
check removed_stopped "$(systemctl is-active $unit)" not_active
check removed_no_process "no uxsched process" sh -c '! grep -qx uxsched /proc/[0-9]*/comm'
s4=$(state)
fact probe_after_remove "$s4"
check removed_restored "$s3 -> $s4 (was $s0)" [ "$s4" = "$s0" ]
check removed_binary_gone "/usr/bin/uxsched" test ! -e /usr/bin/uxsched
check removed_conffile_kept "/etc/uxsched/uxsched.toml" test -f /etc/uxsched/uxsched.toml
check removed_config_files "$(dpkg-query -W -f '${db:Status-Abbrev}' uxsched 2>&1)" \
	sh -c '[ "$(dpkg-query -W -f "\${db:Status-Status}" uxsched)" = config-files ]'
check removed_masked "$(systemctl is-enabled $unit 2>&1)" sh -c "[ \"\$(systemctl is-enabled $unit 2>&1)\" = masked ]"
check removed_no_diversion "dpkg-divert --list uxsched: none" sh -c '[ -z "$(dpkg-divert --list uxsched)" ]'

# 5. Purge: the configuration, the state, the runtime directory and the enablement go.
dpkg -P uxsched >/tmp/dpkg-p.log 2>&1
rc=$?
show </tmp/dpkg-p.log
check dpkg_p "rc=$rc" [ "$rc" -eq 0 ]
status=$(dpkg-query -W -f '${db:Status-Status}' uxsched 2>/dev/null)
check purged_unknown "dpkg-query: ${status:-unknown package}" sh -c "[ -z '$status' ] || [ '$status' = not-installed ]"
left=
for p in /etc/uxsched /var/lib/uxsched /run/uxsched /etc/systemd/system/$unit.service \
	/etc/systemd/system/multi-user.target.wants/$unit.service /usr/lib/systemd/system/$unit.service \
	/var/lib/systemd/deb-systemd-helper-enabled/$unit.service; do
	if [ -e "$p" ] || [ -L "$p" ]; then left="$left $p"; fi
done
check purged_nothing_left "${left:-none of the package's paths left}" [ -z "$left" ]
check purged_unit_unknown "$(systemctl is-enabled $unit 2>&1)" sh -c "! systemctl is-enabled $unit >/dev/null 2>&1"

# Its last 150 lines: journald forwards to the console behind the checks' own lines, and a
# longer dump was still being written when the guest powered off (the verdict lost with it).
echo "--- journalctl -u $unit (this boot, the last 150 lines)"
journalctl -b -u "$unit" --no-pager -o short-monotonic | tail -n 150 | show
fact failed_units_at_end "$(systemctl list-units --failed --plain --no-legend | awk '{ print $1 }' | paste -sd, -)"
fact checks_failed "$fails"
fact uptime_at_end_s "$(uptime_s)"
if [ "$fails" -eq 0 ]; then verdict=pass; else verdict=fail; fi
echo "uxsched-deb-guest verdict $verdict"
EOF

# ext4 image of the tree (room for the package installed and the logs), on a virtio disk.
size_mb=$(($(du -sm "$tree" | cut -f1) + 512))
img=$work/root.ext4
mkfs.ext4 -q -F -L uxsched-guest -d "$tree" "$img" "${size_mb}M"
rm -rf "$tree"

# Debian's kernel gets an NVMe disk too (ext4, 1 GiB, sparse): step 3d measures on it. QEMU
# caps it at NVME_MBPS MiB/s (default 100): under TCG an uncapped emulated disk outruns the
# emulated CPUs, and a disk that is not the bottleneck shows no share of it.
nvme_args=()
if [ "$debian_kernel" = yes ]; then
  mkfs.ext4 -q -F -L uxsched-nvme "$work/nvme.ext4" 1024M
  nvme_bps=$((${NVME_MBPS:-100} * 1048576))
  nvme_args=(-initrd "$initrd" -drive "file=$work/nvme.ext4,format=raw,if=none,id=nv,throttling.bps-total=$nvme_bps"
    -device nvme,serial=uxsched,drive=nv)
fi

console=$out/console.log
summary=$out/summary.txt
guest=$out/guest.log
: >"$console"
echo "deb-guest.sh: booting ${kernel_name:-$(basename "$kernel")} with $(basename "$deb") (TCG, 2 CPUs, up to $timeout_s s a boot; about a minute)" >&2
start=$(date +%s.%N)
walls=
# Two boots of the same image: the first ends in a reboot (QEMU exits: -no-reboot). One host
# thread for both vCPUs (thread=single), as crates/guest boots this kernel: with multi-threaded
# TCG the kernel's live code patching can oops on the patch's int3 (seen here at 1.6 s into a
# boot, before init). panic=-1 turns a panic into QEMU's exit; no_timer_check skips the timer
# check that a loaded host can fail under emulation. A boot whose kernel panicked before the
# checks printed anything is booted once more (and said so in the summary).
boot=1
retried=no
while [ "$boot" -le 2 ]; do
  t=$(date +%s.%N)
  log=$work/console-$boot.log
  set +e
  timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp 2 -m 2048 \
    -kernel "$kernel" \
    -append "root=/dev/vda rw rootfstype=ext4 init=/lib/systemd/systemd console=ttyS0 loglevel=4 systemd.show_status=auto panic=-1 no_timer_check" \
    -drive "file=$img,format=raw,if=virtio" "${nvme_args[@]}" -nic none \
    -display none -monitor none -serial "file:$log" -no-reboot </dev/null
  qrc=$?
  set -e
  sed -i 's/\r$//' "$log"
  walls="$walls boot $boot: $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s (qemu exit $qrc);"
  { echo "=== boot $boot"; cat "$log"; } >>"$console"
  # The check's own output comes as `[time] uxsched-deb-check[pid]: line` (journald forwards
  # it to the console).
  if grep -q 'Kernel panic' "$log" && ! grep -q 'uxsched-deb-check\[' "$log" && [ "$retried" = no ]; then
    retried=yes
    walls="$walls kernel panic before the checks, booted again;"
    echo "deb-guest.sh: boot $boot: the kernel panicked before the checks ran; booting again" >&2
    continue
  fi
  [ "$qrc" -eq 0 ] && grep -q '^\[ *[0-9.]*\] uxsched-deb-check\[[0-9]*\]: uxsched-deb-guest reboot$' "$log" || break
  boot=$((boot + 1))
done
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
rm -f "$img"

# The summary, from the check and fact lines.
sed -n 's/^\[ *[0-9.]*\] uxsched-deb-check\[[0-9]*\]: //p' "$console" >"$guest"
{
  echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes, sha256 $(sha256sum "$deb" | cut -c1-16)…)"
  echo "kernel: ${kernel_name:-$(basename "$kernel")}${initrd:+ (Debian kernel package, its initramfs; an emulated NVMe disk capped at ${NVME_MBPS:-100} MiB/s)}; QEMU TCG (one thread), 2 CPUs, 2 GiB, no network; wall $wall s:$walls"
  echo "root file system: $suite minbase + $packages"
  grep -E '^fact ' "$guest" | sed 's/^fact /  /' || true
  grep -E '^check ' "$guest" | sed 's/^check /  /' || true
  passed=$(grep -cE '^check [^ ]+ pass' "$guest" || true)
  failed=$(grep -cE '^check [^ ]+ fail' "$guest" || true)
  echo "checks: $passed passed, $failed failed"
  verdict=$(sed -n 's/^uxsched-deb-guest verdict //p' "$guest" | tail -n1)
  echo "verdict: ${verdict:-none (the guest did not finish: see $console)}"
} >"$summary"
cat "$summary"
grep -q '^uxsched-deb-guest verdict pass$' "$guest" && [ "$qrc" -eq 0 ] || exit 1
