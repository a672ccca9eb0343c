/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the sched_ext scheduler (scx_uxsched.bpf.c) and its loader (crates/scx) share: the
 * load-time configuration, the boost map's value, the exit record and the counters. Every
 * field has a fixed width; crates/scx/src/abi.rs mirrors this file (#[repr(C)]) and its tests
 * check the sizes.
 */
#ifndef __SCX_UXSCHED_H
#define __SCX_UXSCHED_H

#ifndef __VMLINUX_H__
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
typedef long long s64;
#endif

/* The simulator's policy of the same name (crates/sim/src/policy, mechanism/facfs.rs). */
enum uxs_policy {
	UXS_VTCFS = 0,
	UXS_MCFS = 1,
	UXS_FACFS = 2,
};

/* What the daemon says a thread is (the boost map's value). */
enum uxs_class {
	UXS_CLASS_NONE = 0,
	UXS_CLASS_INTERACTIVE = 1, /* seed 000 eq. 6: the user-interactive task */
	UXS_CLASS_CRITICAL = 2,	   /* seed 003 §5.1: a delay-critical thread (nice 3, never demoted) */
	UXS_CLASS_TOPMOST = 3,	   /* seed 001 §3.2: the topmost process (priority bonus 19) */
	UXS_CLASS_BACKGROUND = 4,  /* seed 003 §5.1: Android's background group, 52 shares */
	UXS_CLASS_NR,
};

/* Read-only after load (section .rodata.conf: its own map, written by the loader). */
struct uxs_conf {
	/* offsetof(struct sched_ext_ops, flags) in this object: the loader sets the ops' flags
	 * (partial or full mode) there before load. Filled in by the compiler, not the loader. */
	u64 ops_flags_offset;
	u32 policy;	    /* enum uxs_policy */
	u32 cut_rate;	    /* MCFS's c (seed 002 §III.A), >= 1 */
	u64 tick_ns;	    /* VT-CFS's preemption tick T (seed 000 Fig. 5) */
	u64 sched_tick_ns;  /* the scheduler tick 1/HZ (eq. 7's T) */
	u64 latency_ns;	    /* CFS's sched_latency (eq. 3) */
	u64 min_gran_ns;    /* CFS's sched_min_granularity (eq. 3) */
	u64 wakeup_gran_ns; /* CFS's sched_wakeup_granularity */
	u64 boost_c_ns;	    /* eq. 6's C: the time a user-interactive task needs per request */
	u32 user_hz;	    /* /proc's clock ticks per second, for the boost map's start time */
	u32 min_perf;	    /* facfs: the lowest performance level the CPUs have (1024 = full) */
};

/* The boost map's value, keyed by thread id (u32). */
struct uxs_boost {
	u32 class;	  /* enum uxs_class */
	u32 pad;
	u64 start_ticks;  /* the thread's start time as /proc/TID/stat field 22; 0: not checked */
};

/* What the kernel said when it stopped the scheduler (struct scx_exit_info). */
struct uxs_exit {
	s32 kind; /* enum scx_exit_kind; 0 while running */
	u32 pad;
	s64 exit_code;
	char reason[128];
	char msg[1024];
};

/* Per-CPU counters (a PERCPU_ARRAY indexed by these). */
enum uxs_stat {
	UXS_ST_ENQUEUED,      /* enqueued on the shared vtime queue */
	UXS_ST_DIRECT,	      /* woken onto an idle CPU */
	UXS_ST_PREEMPT,	      /* wake-up preemptions (kicks) */
	UXS_ST_BOOST_WAKEUPS, /* wake-ups of user-interactive threads (eq. 6 applied) */
	UXS_ST_CUSTOM_SLICE,  /* runs that used the thread's own sched_runtime */
	UXS_ST_STALE_BOOST,   /* boost entries ignored: the tid belongs to another thread now */
	UXS_ST_KEPT,	      /* slices renewed: the thread was still the furthest behind */
	UXS_ST_STOLEN,	      /* threads taken from another CPU's queue by an idle CPU */
	UXS_ST_AWAY,	      /* threads queued away from, or taken from, a CPU held by another class */
	UXS_ST_NR,
};

/* CPU n's vtime-ordered queue is DSQ n + 1. */
#define UXS_DSQ(cpu) ((u64)(cpu) + 1)
#define UXS_MAX_CPUS 64
#define UXS_MAX_BOOSTS 8192

#endif
