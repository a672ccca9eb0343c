/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The seed papers' rules of scx_uxsched, as pure functions of the thread, its class and the
 * owned run-queue: weights (nice, the boost classes, seed 000 eq. 6), the period and slices
 * (eq. 2, 3; vtcfs's tick T; the thread's own sched_runtime), the charge (eq. 1, MCFS's cut-rate,
 * FA-CFS eq. 16-18), wake-up placement (eq. 7, or CFS's sleeper rule) and wake-up preemption.
 * The design essay at the top of scx_uxsched.bpf.c maps each to its paper; that file includes
 * this one once, after the configuration, the maps and the per-CPU clock these functions read.
 */
#ifndef __SCX_UXSCHED_RULES_BPF_H
#define __SCX_UXSCHED_RULES_BPF_H

#define NICE_0 1024
#define WEIGHT_NICE_M20 88761
#define WEIGHT_NICE_3 526
#define BG_SHARES 52

/* sched_prio_to_weight: nice −20 … 19. */
static const u32 nice_weight[40] = {
	88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
	9548,  7620,  6100,  4904,  3906,  3121,  2501,  1991,  1586,  1277,
	1024,  820,   655,   526,   423,   335,   272,   215,   172,   137,
	110,   87,    70,    56,    45,    36,    29,    23,    18,    15,
};

static u64 weight_of_nice(s32 nice)
{
	u32 idx;

	if (nice < -20)
		nice = -20;
	if (nice > 19)
		nice = 19;
	idx = nice + 20;
	return idx < 40 ? nice_weight[idx] : NICE_0;
}

/* The daemon's class for p, or NONE when it has none or the entry is for an older thread that
 * had the same tid (start time in clock ticks as /proc shows it). */
static u32 class_of(struct task_struct *p)
{
	u32 tid = p->pid;
	struct uxs_boost *b = bpf_map_lookup_elem(&boosts, &tid);
	u64 hz = conf.user_hz ? conf.user_hz : 100;

	if (!b || b->class >= UXS_CLASS_NR)
		return UXS_CLASS_NONE;
	if (b->start_ticks && b->start_ticks != p->start_boottime / (1000000000ULL / hz)) {
		stat_inc(UXS_ST_STALE_BOOST);
		return UXS_CLASS_NONE;
	}
	return b->class;
}

/* Nice as weight, then the static classes (the interactive boost is per wake-up). */
static u64 own_weight(struct task_struct *p, u32 class)
{
	s32 nice = (s32)p->static_prio - 120;
	u64 w = weight_of_nice(nice);

	switch (class) {
	case UXS_CLASS_CRITICAL:
		return WEIGHT_NICE_3;
	case UXS_CLASS_TOPMOST:
		return weight_of_nice(nice - 19);
	case UXS_CLASS_BACKGROUND:
		return w < BG_SHARES ? w : BG_SHARES;
	}
	return w;
}

/* Per-CPU share of the owned runnable threads: (ΣW, n) of the paper's run-queue S. */
static void runqueue(u64 *sum_w, u64 *n)
{
	u64 cpus = scx_bpf_nr_cpu_ids();
	u64 w = total_weight, k = nr_runnable;

	if (!cpus)
		cpus = 1;
	*sum_w = w / cpus > NICE_0 ? w / cpus : NICE_0;
	*n = (k + cpus - 1) / cpus;
	if (*n < 1)
		*n = 1;
}

/* Seed 000 eq. 3: P = latency while n ≤ latency / min_gran, else min_gran × n. */
static u64 period(u64 n)
{
	u64 gran = conf.min_gran_ns ? conf.min_gran_ns : 1;

	if (n > conf.latency_ns / gran)
		return gran * n;
	return conf.latency_ns;
}

/* Seed 000 eq. 6: W' = C × ΣW / P, capped at ω−20. */
static u64 boost_weight(void)
{
	u64 sum_w, n, w;

	runqueue(&sum_w, &n);
	w = (conf.boost_c_ns * sum_w + period(n) - 1) / period(n);
	return w < WEIGHT_NICE_M20 ? w : WEIGHT_NICE_M20;
}

/* The policy's slice for a thread of effective weight w (before facfs's eq. 16 stretch). */
static u64 policy_slice(u64 w)
{
	u64 sum_w, n, s;

	if (conf.policy == UXS_VTCFS)
		return conf.tick_ns;
	runqueue(&sum_w, &n);
	/* Eq. 2: w / ΣW × P, ΣW counting this thread at its effective weight. */
	s = period(n) * w / (sum_w + w);
	return s > conf.min_gran_ns ? s : conf.min_gran_ns;
}

/* The thread's own sched_runtime (6.12 keeps it in p->se), else the policy's. */
static u64 slice_of(struct task_struct *p, u64 w)
{
	if (p->se.custom_slice) {
		stat_inc(UXS_ST_CUSTOM_SLICE);
		return p->se.slice;
	}
	return policy_slice(w);
}

/* FA-CFS's f_k / f_j of `cpu` now (1024 = full speed), never below the slowest level its
 * frequency range has (conf.min_perf): without cpufreq that is full speed. */
static u64 perf_of(s32 cpu)
{
	u64 perf = scx_bpf_cpuperf_cur(cpu);

	if (perf > SCX_CPUPERF_ONE)
		perf = SCX_CPUPERF_ONE;
	if (perf < conf.min_perf)
		perf = conf.min_perf;
	return perf ? perf : SCX_CPUPERF_ONE;
}

/* Virtual time for `used` ns at weight w on `cpu` (eq. 1; mcfs / c; facfs × perf). */
static u64 charge(u64 used, u64 w, s32 cpu)
{
	u64 v = used * NICE_0 / (w ? w : 1);

	if (conf.policy == UXS_MCFS && conf.cut_rate > 1)
		v /= conf.cut_rate;
	if (conf.policy == UXS_FACFS)
		v = v * perf_of(cpu) / SCX_CPUPERF_ONE;
	return v;
}

/* Set p's effective weight for this run and its wake-up vtime on `cpu`; returns the weight. */
static u64 prepare_wakeup(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	u32 class = class_of(p);
	u64 w = own_weight(p, class), vt, now_v = clock_of(cpu);

	tctx->boosted = 0;
	if (class == UXS_CLASS_INTERACTIVE) {
		u64 bw = boost_weight();

		if (bw > w)
			w = bw;
		tctx->boosted = 1;
		stat_inc(UXS_ST_BOOST_WAKEUPS);
	}
	tctx->weight = w;
	rebase(p, tctx, cpu);
	vt = p->scx.dsq_vtime;
	if (conf.policy == UXS_VTCFS) {
		/* Eq. 7: min_vruntime + ω0 / ω−20 × T_tick, unconditionally. */
		vt = now_v + conf.sched_tick_ns * NICE_0 / WEIGHT_NICE_M20;
	} else if (vtime_before(vt, now_v - conf.latency_ns / 2)) {
		vt = now_v - conf.latency_ns / 2;
	}
	p->scx.dsq_vtime = vt;
	return w;
}

/* Wake-up preemption (CFS's check_preempt_wakeup, against the CPU the wakee was placed on):
 * whether to kick `cpu` for a woken p of effective weight w and slice `slice`. */
static bool should_preempt(struct task_struct *p, s32 cpu, u64 w, u64 slice)
{
	struct cpu_ctx *c = cctx_of(cpu);
	u64 now = bpf_ktime_get_ns(), ran, left, cur, gran;

	if (!c || !c->busy)
		return false;
	ran = now > c->started ? now - c->started : 0;
	left = c->slice > ran ? c->slice - ran : 0;
	/* Every policy: a shorter custom slice preempts (6.12 EEVDF). */
	if (p->se.custom_slice && slice < left)
		return true;
	if (conf.policy == UXS_VTCFS)
		return false;
	/* The current thread's vtime now against the wakee's, with the wake-up granularity
	 * scaled to the wakee's weight (CFS's wakeup_gran). */
	cur = c->vtime + charge(ran, c->weight, cpu);
	gran = conf.wakeup_gran_ns * NICE_0 / (w ? w : 1);
	return cur > p->scx.dsq_vtime + gran;
}

#endif /* __SCX_UXSCHED_RULES_BPF_H */
