/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * scx_uxsched: the seed papers' fair-class policies as a sched_ext scheduler (Linux 6.12 API).
 *
 * Design, rule by rule (papers in shared/seeds/; the simulator's counterparts in crates/sim):
 *
 * Queues. Each CPU has a dispatch queue ordered by virtual time (p->scx.dsq_vtime), the
 * counterpart of CFS's per-CPU red-black tree of vruntimes; a thread is queued on the CPU
 * select_cpu chose (an idle one takes it directly), and a CPU whose queue is empty takes the
 * head of another's (CFS's new-idle balance, simplified). Virtual time is kept in the kernel's
 * units: nice 0 = weight 1024, the table of sched_prio_to_weight (seed 000 eq. 1), so the
 * papers' formulas apply unchanged. Each CPU keeps vtime_now, the largest vtime that started
 * running there, for its run-queue's min_vruntime (monotonic, like it); a thread that moves to
 * another CPU is rebased from the old CPU's clock to the new one's (CFS's migration rule), so
 * threads pinned to a busy CPU are not judged by an idle one's clock. The running thread keeps
 * the CPU while its vtime, charged up to now, is not ahead of its queue's head (dispatch).
 * A CPU held by a thread of another class (fair in partial mode, real-time) runs none of ours,
 * so a thread is queued on a CPU running one of ours where there is one (queue_cpu), and a
 * thread left on a held CPU's queue is taken by the first CPU that finds it further behind than
 * what it would run (take_from_held): not CFS, whose run-queues hold every fair thread.
 *
 * Charging (seed 000 eq. 1): a thread that ran `used` ns at weight w advances by
 * used × 1024 / w.
 *   - mcfs (seed 002 §III.A, Fig. 3): the advance is divided by the system-wide cut-rate c
 *     (a shift when c is a power of two, as in the paper).
 *   - facfs (seed 004 eq. 16-18): the advance is the work done, used × perf / 1024 with perf =
 *     scx_bpf_cpuperf_cur() of the CPU it ran on (1024 = full speed): scaling the weight by
 *     f_j / f_k (eq. 18) with f_j the full speed. The slice is stretched by 1024 / perf (eq. 16)
 *     when the thread starts running, so the work per slice stays what it was. perf is never
 *     taken below the slowest level the CPUs' frequency range has (the loader reads cpufreq's
 *     cpuinfo_min/max_freq; full speed without cpufreq).
 *
 * Slices. vtcfs: the constant preemption tick T (Fig. 5: no eq. 2 slice). mcfs and facfs: CFS's
 * slice w / ΣW × P(n) (eq. 2, 3), with ΣW and n the runnable weight and count of the owned
 * threads divided by the number of CPUs (an approximation of the paper's per-CPU run-queue S).
 * A thread that set its own slice with sched_setattr(sched_runtime) (6.12: p->se.custom_slice,
 * p->se.slice, clamped by the kernel to 0.1–100 ms) gets that slice instead, in every policy.
 *
 * Wake-up placement. vtcfs (seed 000 eq. 7): vtime = vtime_now + (ω0 / ω−20) × T_tick, set
 * unconditionally, so the woken thread sits second from the left. mcfs, facfs: CFS's
 * place_entity for sleepers, max(own vtime, vtime_now − latency / 2) — in vtime units, so
 * under mcfs the sleeper credit is worth c times more CPU time (the paper's intent).
 *
 * Wake-up preemption. vtcfs: none (Fig. 5 decides only at ticks; here: at slice end).
 * mcfs, facfs: CFS's check_preempt_wakeup on the CPU the wakee was placed on (select_cpu's
 * choice): it is kicked when its current thread's vtime exceeds the wakee's by more than the
 * wake-up granularity scaled to the wakee's weight (gran × 1024 / w). Every policy: a thread
 * with a custom slice shorter than what the current thread has left preempts it — 6.12 EEVDF's
 * "shorter slices wake-up-preempt" rule, so the real-time API's latency hint is not lost.
 *
 * Weights. nice as weight (p->static_prio), then the class the daemon wrote into the `boosts`
 * map (keyed by tid, checked against the thread's start time against tid reuse):
 *   - interactive (seed 000 §IV eq. 6): at each wake-up W' = C × ΣW / P(n), capped at ω−20 and
 *     never below its own weight, kept until it leaves the CPU (then its own weight again);
 *   - critical (seed 003 §5.1, ShuffleDog): nice 3's weight, and never the background weight;
 *   - topmost (seed 001 §3.2, EIMOS): nice − 19 (the "priority bonus of 19"), at least −20;
 *   - background (seed 003 §5.1): Android's bg_non_interactive share, 52.
 *
 * Mode. Partial by default (SCX_OPS_SWITCH_PARTIAL, set by the loader at the offset the
 * compiler records in conf.ops_flags_offset): only SCHED_EXT threads are ours. In 6.12 the ext
 * class sits below the fair class, so ours run only where no fair thread is runnable. The
 * daemon (`uxsched daemon --backend scx`, crates/daemon/src/backend/scx.rs) therefore switches
 * the competition it knows together — every thread of the app in front (interactive, critical,
 * topmost) and of the background apps (background) — so the boosts above and the demotion are
 * weighed against each other here, on one queue, as the papers weigh them; partners in other
 * processes and kernel workers stay fair (they serve every app and never wait behind it), and
 * what the daemon does not see outranks ours: full mode takes every fair thread instead
 * (docs/mechanisms.md, "sched_ext").
 */
#include <scx/common.bpf.h>
#include "scx_uxsched.h"

char _license[] SEC("license") = "GPL";

const volatile struct uxs_conf conf SEC(".rodata.conf") = {
	.ops_flags_offset = __builtin_offsetof(struct sched_ext_ops, flags),
	.policy = UXS_VTCFS,
	.cut_rate = 16,
	.tick_ns = 3000000,
	.sched_tick_ns = 1000000,
	.latency_ns = 5000000,
	.min_gran_ns = 1000000,
	.wakeup_gran_ns = 1000000,
	.boost_c_ns = 4000000,
	.user_hz = 100,
};

/* Per thread: what its current run is charged at. */
struct task_ctx {
	u64 weight;	   /* effective weight of this run (the boost included) */
	u64 queued_weight; /* what runnable() added to the totals, removed by quiescent() */
	u64 started;	   /* when it last started running */
	u32 boosted;	   /* eq. 6 applied at this wake-up */
	s32 cpu;	   /* where it last ran (its vtime is on that CPU's clock) */
};

/* Per CPU: its clock, and the thread running there (for wake-up preemption). */
struct cpu_ctx {
	u64 vtime_now; /* the largest vtime that started here: min_vruntime's stand-in */
	u64 vtime;   /* its vtime when it started */
	u64 started; /* when */
	u64 weight;  /* its effective weight */
	u64 slice;   /* the slice it was given */
	u32 busy;    /* one of ours is running */
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UXS_MAX_CPUS);
	__type(key, u32);
	__type(value, struct cpu_ctx);
} cpu_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, UXS_MAX_BOOSTS);
	__type(key, u32);
	__type(value, struct uxs_boost);
} boosts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UXS_ST_NR);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct uxs_exit);
} exit_info SEC(".maps");

/* The owned runnable threads: their total (own) weight and count, for eq. 2, 3 and 6. */
static u64 total_weight;
static u64 nr_runnable;

static void stat_inc(u32 idx)
{
	u64 *c = bpf_map_lookup_elem(&stats, &idx);

	if (c)
		(*c)++;
}

static inline bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

static struct task_ctx *tctx_of(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

static struct cpu_ctx *cctx_of(s32 cpu)
{
	u32 key = cpu;

	return bpf_map_lookup_elem(&cpu_ctxs, &key);
}

/* The CPU's clock (min_vruntime's stand-in). */
static u64 clock_of(s32 cpu)
{
	struct cpu_ctx *c = cctx_of(cpu);

	return c ? c->vtime_now : 0;
}

/* A thread that last ran elsewhere moves from that CPU's clock to `cpu`'s. */
static void rebase(struct task_struct *p, struct task_ctx *tctx, s32 cpu)
{
	if (tctx->cpu == cpu || tctx->cpu < 0)
		return;
	p->scx.dsq_vtime = p->scx.dsq_vtime - clock_of(tctx->cpu) + clock_of(cpu);
	tctx->cpu = cpu;
}

/* The papers' rules (weights, slices, charge, placement, preemption): */
#include "scx_uxsched_rules.bpf.h"

s32 BPF_STRUCT_OPS(uxs_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = tctx_of(p);
	bool idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);
	if (idle && tctx) {
		u64 w = prepare_wakeup(p, tctx, cpu);

		stat_inc(UXS_ST_DIRECT);
		scx_bpf_dispatch(p, SCX_DSQ_LOCAL, slice_of(p, w), 0);
	}
	return cpu;
}

/*
 * Where to queue a woken or preempted thread. A CPU running a thread that is not ours (a fair
 * one in partial mode, where the ext class ranks below the fair class; a real-time one in
 * either mode) runs nothing of ours until that thread stops, and its queue is taken from by
 * others only once theirs are empty: a boosted thread queued there waited behind the daemon's
 * and the harness's fair work while the other CPU ran hogs (partial mode in the guest, issue
 * 13). So queue on an allowed CPU running one of ours instead, where wake-up preemption can act.
 */
static s32 queue_cpu(struct task_struct *p, s32 cpu)
{
	struct cpu_ctx *c = cctx_of(cpu);
	s32 i, nr;

	if (!c || c->busy)
		return cpu;
	nr = scx_bpf_nr_cpu_ids();
	bpf_for(i, 0, nr) {
		struct cpu_ctx *o;

		if (i == cpu || i >= UXS_MAX_CPUS || !bpf_cpumask_test_cpu(i, p->cpus_ptr))
			continue;
		o = cctx_of(i);
		if (o && o->busy) {
			stat_inc(UXS_ST_AWAY);
			return i;
		}
	}
	return cpu;
}

void BPF_STRUCT_OPS(uxs_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = queue_cpu(p, scx_bpf_task_cpu(p));
	bool kick = false;
	u64 w, slice;

	if (!tctx) {
		scx_bpf_error("uxsched: no context for %s[%d]", p->comm, p->pid);
		return;
	}
	if (enq_flags & SCX_ENQ_WAKEUP) {
		w = prepare_wakeup(p, tctx, cpu);
	} else {
		rebase(p, tctx, cpu);
		w = tctx->weight ? tctx->weight : own_weight(p, class_of(p));
	}
	tctx->weight = w;
	slice = slice_of(p, w);
	if (enq_flags & SCX_ENQ_WAKEUP)
		kick = should_preempt(p, cpu, w, slice);
	stat_inc(UXS_ST_ENQUEUED);
	scx_bpf_dispatch_vtime(p, UXS_DSQ(cpu), slice, p->scx.dsq_vtime, enq_flags);
	if (kick) {
		stat_inc(UXS_ST_PREEMPT);
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	}
}

/* The head of `q`'s queue that may run on `cpu`, if any. */
static bool queue_head_for(s32 q, s32 cpu, u64 *vtime)
{
	struct task_struct *t;

	bpf_for_each(scx_dsq, t, UXS_DSQ(q), 0) {
		if (!bpf_cpumask_test_cpu(cpu, t->cpus_ptr))
			continue;
		*vtime = t->scx.dsq_vtime;
		return true;
	}
	return false;
}

/* The vtime of the first thread in `cpu`'s own queue that may run there, if any. */
static bool queue_head(s32 cpu, u64 *vtime)
{
	return queue_head_for(cpu, cpu, vtime);
}

/*
 * A CPU takes the head of the queue of a CPU held by a thread that is not ours (see queue_cpu:
 * a thread preempted there by a fair or real-time one is queued back on it) when that head is
 * further behind than `bound` (when `bounded`), on this CPU's clock: before its own queue's
 * head, and before renewing the slice of the thread it runs.
 */
static bool take_from_held(s32 cpu, u64 bound, bool bounded)
{
	u64 head;
	s32 i, nr = scx_bpf_nr_cpu_ids();

	bpf_for(i, 0, nr) {
		struct cpu_ctx *o;

		if (i == cpu || i >= UXS_MAX_CPUS)
			continue;
		o = cctx_of(i);
		if (!o || o->busy || !queue_head_for(i, cpu, &head))
			continue;
		head = head - o->vtime_now + clock_of(cpu);
		if (bounded && !vtime_before(head, bound))
			continue;
		if (scx_bpf_consume(UXS_DSQ(i))) {
			stat_inc(UXS_ST_AWAY);
			return true;
		}
	}
	return false;
}

/*
 * The kernel asks for the next thread before it puts back the one whose slice ended, so
 * consuming unconditionally would hand the CPU to the queue's head even when `prev` is still
 * the furthest behind. As CFS does (and VT-CFS's flowchart, Fig. 5), keep running `prev` with a
 * fresh slice while its vtime, charged up to now, is not ahead of the head's.
 */
void BPF_STRUCT_OPS(uxs_dispatch, s32 cpu, struct task_struct *prev)
{
	struct task_ctx *tctx;
	struct cpu_ctx *c;
	u64 head = 0, cur, now;
	bool has_head = queue_head(cpu, &head);
	s32 i, nr;

	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED) || !(tctx = tctx_of(prev)))
		goto consume;
	now = bpf_ktime_get_ns();
	cur = prev->scx.dsq_vtime;
	if (now > tctx->started)
		cur += charge(now - tctx->started, tctx->weight, cpu);
	if (has_head && vtime_before(head, cur))
		goto consume;
	if (take_from_held(cpu, cur, true))
		return;
	prev->scx.slice = slice_of(prev, tctx->weight);
	c = cctx_of(cpu);
	if (c) {
		c->vtime = cur;
		c->started = now;
		c->slice = prev->scx.slice;
	}
	stat_inc(UXS_ST_KEPT);
	return;
consume:
	if (take_from_held(cpu, head, has_head))
		return;
	if (scx_bpf_consume(UXS_DSQ(cpu)))
		return;
	/* Nothing here: take work from another CPU's queue (rebased when it starts). */
	nr = scx_bpf_nr_cpu_ids();
	bpf_for(i, 0, nr) {
		if (i != cpu && i < UXS_MAX_CPUS && scx_bpf_consume(UXS_DSQ(i))) {
			stat_inc(UXS_ST_STOLEN);
			return;
		}
	}
}

void BPF_STRUCT_OPS(uxs_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = tctx_of(p);

	if (!tctx)
		return;
	tctx->queued_weight = own_weight(p, class_of(p));
	__sync_fetch_and_add(&total_weight, tctx->queued_weight);
	__sync_fetch_and_add(&nr_runnable, 1);
}

void BPF_STRUCT_OPS(uxs_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = tctx_of(p);

	if (!tctx)
		return;
	__sync_fetch_and_sub(&total_weight, tctx->queued_weight);
	__sync_fetch_and_sub(&nr_runnable, 1);
	tctx->queued_weight = 0;
}

void BPF_STRUCT_OPS(uxs_running, struct task_struct *p)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *c = cctx_of(cpu);
	u64 now = bpf_ktime_get_ns();

	if (tctx)
		rebase(p, tctx, cpu);
	if (c && vtime_before(c->vtime_now, p->scx.dsq_vtime))
		c->vtime_now = p->scx.dsq_vtime;
	if (conf.policy == UXS_FACFS && !p->se.custom_slice) {
		/* Eq. 16: S' = (f_j / f_k) × S, f_j full speed, f_k this CPU's now. */
		u64 perf = perf_of(cpu);

		if (perf < SCX_CPUPERF_ONE)
			p->scx.slice = p->scx.slice * SCX_CPUPERF_ONE / perf;
	}
	if (tctx)
		tctx->started = now;
	if (c) {
		c->vtime = p->scx.dsq_vtime;
		c->started = now;
		c->weight = tctx && tctx->weight ? tctx->weight : NICE_0;
		c->slice = p->scx.slice;
		c->busy = 1;
	}
}

void BPF_STRUCT_OPS(uxs_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *c = cctx_of(cpu);
	u64 now = bpf_ktime_get_ns();

	if (c)
		c->busy = 0;
	if (!tctx)
		return;
	if (now > tctx->started)
		p->scx.dsq_vtime += charge(now - tctx->started, tctx->weight, cpu);
	/* Eq. 6's boost lasts until the thread leaves the CPU (seed 000 §IV). */
	if (tctx->boosted) {
		tctx->boosted = 0;
		tctx->weight = own_weight(p, class_of(p));
	}
}

void BPF_STRUCT_OPS(uxs_enable, struct task_struct *p)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = scx_bpf_task_cpu(p);

	p->scx.dsq_vtime = clock_of(cpu);
	if (tctx)
		tctx->cpu = cpu;
}

s32 BPF_STRUCT_OPS(uxs_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->weight = NICE_0;
	tctx->cpu = -1;
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(uxs_init)
{
	s32 i, nr = scx_bpf_nr_cpu_ids(), ret;

	if (nr > UXS_MAX_CPUS) {
		scx_bpf_error("uxsched: %u CPUs, built for at most %d", scx_bpf_nr_cpu_ids(),
			      UXS_MAX_CPUS);
		return -E2BIG;
	}
	bpf_for(i, 0, nr) {
		ret = scx_bpf_create_dsq(UXS_DSQ(i), -1);
		if (ret)
			return ret;
	}
	return 0;
}

void BPF_STRUCT_OPS(uxs_exit, struct scx_exit_info *ei)
{
	u32 zero = 0;
	struct uxs_exit *e = bpf_map_lookup_elem(&exit_info, &zero);

	if (!e)
		return;
	bpf_probe_read_kernel_str(e->reason, sizeof(e->reason), ei->reason);
	bpf_probe_read_kernel_str(e->msg, sizeof(e->msg), ei->msg);
	e->exit_code = ei->exit_code;
	__sync_val_compare_and_swap(&e->kind, e->kind, ei->kind);
}

SCX_OPS_DEFINE(uxsched_ops,
	       .select_cpu = (void *)uxs_select_cpu,
	       .enqueue = (void *)uxs_enqueue,
	       .dispatch = (void *)uxs_dispatch,
	       .runnable = (void *)uxs_runnable,
	       .running = (void *)uxs_running,
	       .stopping = (void *)uxs_stopping,
	       .quiescent = (void *)uxs_quiescent,
	       .enable = (void *)uxs_enable,
	       .init_task = (void *)uxs_init_task,
	       .init = (void *)uxs_init,
	       .exit = (void *)uxs_exit,
	       .flags = SCX_OPS_SWITCH_PARTIAL,
	       .name = "uxsched");
