# Sourced by the check of scripts/deb-guest.sh inside its guest (steps 3c and 3d): measurements
# (`fact` lines), and in 3d one check, that the switch put the NVMe disk on BFQ. Uses the check's
# fact, check, wait_for, iocost, $conf, $unit, $vda.

# readers PHASE focus|none DIR: two direct-I/O readers of DIR/rd.a and DIR/rd.b in two services
# of user nobody, reader a focused (its unit's IOWeight 500 through uxsched) or not; whole 64
# MiB passes per reader in two 8-s windows.
readers() {
	for x in a b; do
		: >/tmp/passes.$x; chmod 666 /tmp/passes.$x
		systemd-run --quiet --unit=uxsched-rd-$x -p User=nobody sh -c \
			"while :; do dd if=$3/rd.$x of=/dev/null bs=256k iflag=direct 2>/dev/null && echo x >>/tmp/passes.$x; done"
	done
	wait_for 10 sh -c '[ "$(systemctl show -p MainPID --value uxsched-rd-a)" -gt 0 ]'
	if [ "$2" = focus ]; then
		uxsched focus "$(systemctl show -p MainPID --value uxsched-rd-a)" >/dev/null 2>&1
		want=$(sed -n 's/^front_unit_io_weight = //p' $conf)
		wait_for 30 sh -c "[ \"\$(systemctl show -p IOWeight --value uxsched-rd-a)\" = $want ]"
	fi
	for w in 1 2; do
		: >/tmp/passes.a; : >/tmp/passes.b
		sleep 8
		fact "io_$1_$w" "a=$(wc -l </tmp/passes.a) b=$(wc -l </tmp/passes.b) passes; IOWeight a=$(systemctl show -p IOWeight --value uxsched-rd-a) b=$(systemctl show -p IOWeight --value uxsched-rd-b); iocost=$(iocost); io.bfq.weight a=$(bfq_weight uxsched-rd-a) b=$(bfq_weight uxsched-rd-b)"
	done
	systemctl stop uxsched-rd-a uxsched-rd-b
}

# bfq_weight UNIT: the first line of its io.bfq.weight (absent without the io controller).
bfq_weight() { head -n1 /sys/fs/cgroup/system.slice/$1.service/io.bfq.weight 2>/dev/null || echo absent; }

# rd_files DIR: the readers' two 64 MiB files, readable by nobody.
rd_files() {
	for x in a b; do dd if=/dev/zero of=$1/rd.$x bs=1M count=64 oflag=direct 2>/dev/null; done
	chown nobody $1/rd.a $1/rd.b
}

# set_conf KEY VALUE: one line of the [storage] table.
set_conf() { sed -i "s/^$1 = .*/$1 = $2/" $conf; }

daemon_start() {
	systemctl start $unit
	wait_for 60 sh -c "uxsched status >/dev/null 2>&1"
}

# 3c. Two readers on the root disk (vda, virtio), one focused: without the daemon, with it but
# iocost off, with it and iocost on.
rd_files /var/tmp
readers no_daemon none /var/tmp
set_conf switch_to_iocost false
daemon_start
readers weight_without_iocost focus /var/tmp
systemctl stop $unit
set_conf switch_to_iocost true
daemon_start
fact iocost_qos "$(grep "^$vda " /sys/fs/cgroup/io.cost.qos)"
fact iocost_model "$(grep "^$vda " /sys/fs/cgroup/io.cost.model)"
readers weight_with_iocost focus /var/tmp
systemctl stop $unit
fact iocost_after_measurement "$(iocost)"
rm -f /var/tmp/rd.a /var/tmp/rd.b
set_conf switch_to_iocost false

# 3d. Only where the guest has an NVMe disk (GUEST_KERNEL=debian: Debian's own kernel, which has
# the NVMe driver, BFQ and the memory controller): its elevator is none, as on any NVMe machine.
# The same two readers on it — no daemon (none), then the daemon switching it to BFQ with the
# focused unit's IOWeight 500, and 10000; then one focused reader against a writer in another
# service (128 MiB files written with fsync, over and over: writeback charged to the writer's
# unit), four ways: no daemon (none), the BFQ switch alone, the switch and IOWeight 500, 10000.
if [ -b /dev/nvme0n1 ]; then
	nvq=/sys/block/nvme0n1/queue/scheduler
	fact nvme_scheduler "$(cat $nvq)"
	mkdir -p /mnt/nv && mount /dev/nvme0n1 /mnt/nv && chmod 1777 /mnt/nv
	rd_files /mnt/nv
	readers nv_none none /mnt/nv
	set_conf switch_to_bfq true
	set_conf bfq_devices '["nvme0n1"]'
	daemon_start
	check nvme_switched_to_bfq "$(cat $nvq)" grep -q '\[bfq\]' $nvq
	readers nv_bfq_weight focus /mnt/nv
	systemctl stop $unit
	# The largest IOWeight, which systemd turns into BFQ's largest weight (1000).
	set_conf front_unit_io_weight 10000
	daemon_start
	readers nv_bfq_weight_max focus /mnt/nv
	systemctl stop $unit
	set_conf front_unit_io_weight 500
	fact nvme_scheduler_after "$(cat $nvq)"

	# writer_and_reader PHASE focus|none
	writer_and_reader() {
		: >/tmp/passes.a; : >/tmp/writes; chmod 666 /tmp/passes.a /tmp/writes
		systemd-run --quiet --unit=uxsched-wr -p User=nobody sh -c \
			"i=0; while :; do dd if=/dev/zero of=/mnt/nv/wr.\$i bs=1M count=128 conv=fsync 2>/dev/null && echo x >>/tmp/writes; i=\$((1 - i)); done"
		systemd-run --quiet --unit=uxsched-rd-a -p User=nobody sh -c \
			"while :; do dd if=/mnt/nv/rd.a of=/dev/null bs=256k iflag=direct 2>/dev/null && echo x >>/tmp/passes.a; done"
		wait_for 10 sh -c '[ "$(systemctl show -p MainPID --value uxsched-rd-a)" -gt 0 ]'
		if [ "$2" = focus ]; then
			uxsched focus "$(systemctl show -p MainPID --value uxsched-rd-a)" >/dev/null 2>&1
			sleep 1
		fi
		sleep 2
		for w in 1 2; do
			: >/tmp/passes.a; : >/tmp/writes
			sleep 8
			fact "wb_$1_$w" "reader=$(wc -l </tmp/passes.a) passes of 64 MiB; writer=$(wc -l </tmp/writes) files of 128 MiB; IOWeight reader=$(systemctl show -p IOWeight --value uxsched-rd-a) writer=$(systemctl show -p IOWeight --value uxsched-wr); io.bfq.weight reader=$(bfq_weight uxsched-rd-a) writer=$(bfq_weight uxsched-wr); elevator=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $nvq)"
		done
		fact "wb_$1_writer_io_stat" "$(grep "^$(cat /sys/block/nvme0n1/dev) " /sys/fs/cgroup/system.slice/uxsched-wr.service/io.stat 2>&1)"
		systemctl stop uxsched-rd-a uxsched-wr
		rm -f /mnt/nv/wr.0 /mnt/nv/wr.1
	}
	fact system_slice_subtree "$(cat /sys/fs/cgroup/system.slice/cgroup.subtree_control)"
	writer_and_reader none none
	set_conf front_unit_io_weight 0
	daemon_start
	writer_and_reader bfq focus
	systemctl stop $unit
	set_conf front_unit_io_weight 500
	daemon_start
	writer_and_reader bfq_weight focus
	systemctl stop $unit
	set_conf front_unit_io_weight 10000
	daemon_start
	writer_and_reader bfq_weight_max focus
	systemctl stop $unit
	fact nvme_scheduler_end "$(cat $nvq)"
	set_conf switch_to_bfq false
	set_conf bfq_devices '[]'
	umount /mnt/nv
fi
set_conf front_unit_io_weight 0
