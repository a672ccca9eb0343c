/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared between bpf/tracker.bpf.c and crates/tracker/src/wire.rs: the layouts of the ring
 * buffer's events and of the maps userspace writes. Any change here is a change there.
 */
#ifndef UXSCHED_TRACKER_H
#define UXSCHED_TRACKER_H

/* Event kinds (struct event.kind). */
#define EV_START 1  /* a = input waker (zeros when IRQ), b = the app thread it woke */
#define EV_EDGE 2   /* a woke b, first time in this episode */
#define EV_DISPLAY 3 /* a woke b, a display thread; userspace decides if the episode is over */
#define EV_FORK 4   /* a created b (a thread of the app's family) */
#define EV_EXEC 5   /* a exec'd */
#define EV_EXIT 6   /* a exited */
#define EV_RENAME 7 /* a renamed itself (a.comm is the new name) */
#define EV_LOOP 8   /* a, handed work by member b's process-mate, woke member b back */

/* Event flags. */
#define EVF_IRQ 1 /* the wake-up came from hard IRQ (or softirq over a user task), not a timer */
#define EVF_FAMILY 2 /* EV_DISPLAY: the waker was not reached from the UI thread but is of the
		      * app's process family (a frame producer paced by its own timer) */

/* Partner roles (the `partners` map's values). */
#define ROLE_INPUT 1
#define ROLE_DISPLAY 2

#define COMM_LEN 16

struct task_ref {
	__u32 tid;
	__u32 tgid;
	__u64 start_ns; /* task->start_boottime: /proc/<tid>/stat field 22 × (1e9 / USER_HZ) */
	char comm[COMM_LEN];
	__u32 kthread;
	__u32 _pad;
}; /* 40 bytes */

struct event {
	__u32 kind;
	__u32 flags;
	__u64 ts; /* CLOCK_MONOTONIC ns */
	__u64 epoch;
	struct task_ref a;
	struct task_ref b;
}; /* 104 bytes */

/* Written by userspace (index 0). */
struct config {
	__u32 fg_tgid;	  /* the foreground app; 0 = none */
	__u32 irq_starts; /* a device-IRQ wake-up of an app thread starts an episode */
	__u64 timeout_ns; /* an episode older than this records nothing more */
	__u32 max_depth;  /* hops from the UI thread followed in the kernel */
	__u32 _pad;
	__u64 closed_epoch; /* userspace resolved this episode: record nothing more of it */
};

/* Written by the kernel at each episode start (index 0); userspace only reads it. */
struct state {
	__u64 epoch;
	__u64 start_ns;
	__u32 open;
	__u32 ui_tid;
};

/* A thread reached from the UI thread in episode `epoch`, `depth` hops away. */
struct hot {
	__u64 epoch;
	__u32 depth;
	__u32 _pad;
	__u64 ran_ns;	/* on-CPU time in this episode (sched_switch) */
	__u64 since_ns; /* when it last went on CPU, 0 when off */
};

struct edge_key {
	__u64 epoch;
	__u32 waker;
	__u32 wakee;
};

#endif
