// SPDX-License-Identifier: GPL-2.0-only
/*
 * uxsched's thread tracker, kernel side: follows an interaction from the input wake-up of a
 * foreground-app thread through every thread it wakes (across processes and kernel workers) and
 * reports each new waker→wakee edge of the episode once, and the display wake-ups of the app's
 * process family (issue 30's frame producers). Classification (seed 003 §4's cycle rule and the
 * pipeline rule, which also decides when an episode ends) is done in userspace:
 * crates/tracker/src/episode.rs.
 *
 * Kernel types: only the fields used are declared, with preserve_access_index, so CO-RE
 * relocates them against the running kernel's BTF at load time. No vmlinux.h is generated: the
 * build needs neither bpftool nor /sys/kernel/btf (CI containers, cross builds), and the object
 * does not depend on the build machine's kernel.
 *
 * Wake-ups are taken at sched_waking, not sched_wakeup: include/trace/events/sched.h documents
 * sched_waking as "guaranteed to be called from the waking context", while sched_wakeup may run
 * on the wakee's CPU from the IPI of a queued remote wake-up (ttwu_queue_wakelist), where
 * `current` is not the waker. sched_wakeup_new is called by the parent in wake_up_new_task().
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "tracker.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD 0x00200000

struct task_struct {
	int pid;
	int tgid;
	unsigned int flags;
	__u64 start_boottime;
	char comm[16];
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct state);
} state SEC(".maps");

/* tid → ROLE_* for input dispatcher and display threads (userspace, by name; inherited on fork). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} partners SEC(".maps");

/* tid → 1 for the delay-critical set's members (userspace keeps it in step). An event that
 * only concerns members cannot change the set, so it does not wake the tracker
 * (BPF_RB_NO_WAKEUP): it is read with the next event that can, or at the tracker's timeout. At
 * a keystroke's rate the tracker then wakes for a thread new to the path and once at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} members SEC(".maps");

/* tgid → 1 for the foreground app's process family: its descendants with the same uid (a
 * browser's zygotes, renderers, GPU process), filled by userspace at focus and inherited here on
 * fork, so a new renderer counts from its first instruction. Its threads' wake-ups of a display
 * thread are reported even when a timer, not the episode, woke them (the frame producers of a
 * pipeline paced by vsync; docs/tracker.md, "Pipelines"). Fixed size: a family beyond it is
 * followed only through its wake-ups, as any other process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} family SEC(".maps");

/* tid → when a member last handed it work (issue 30's hand-off rule): a thread of the app's
 * family that then wakes a member of its own process within the episode timeout is on the
 * interaction's path even when the episode had resolved before the member handed it work (a
 * renderer's compositor thread rasterising on its next frame through a pool thread; the GPU
 * process's IO thread passing the renderer's frame on to its display compositor). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} handoffs SEC(".maps");

/* tid → the episode it was reached in: the in-kernel filter. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct hot);
} hot SEC(".maps");

/* (episode, waker, wakee) → wake-ups: the aggregated edges. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct edge_key);
	__type(value, __u64);
} edges SEC(".maps");

/*
 * Per CPU: what the CPU is serving now, from the irq/softirq/timer tracepoints. The preempt count
 * would say it directly, but on x86 it is a per-CPU variable that BPF can reach only through
 * kallsyms, and kernels without CONFIG_KALLSYMS_ALL (like this project's) do not list it.
 */
struct irq_ctx {
	__u32 hard;  /* device interrupt handlers (irq_handler_entry) and irq_work */
	__u32 dev;   /* of which handlers of input devices (input_irqs) */
	__u32 soft;  /* softirqs */
	__u32 timer; /* hrtimer and timer-wheel callbacks, in hard or soft IRQ */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_ctx);
} irq_ctx SEC(".maps");

/* IRQ numbers of input devices (and vsync sources), from /proc/interrupts by name (userspace). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} input_irqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Events that found the ring buffer full (index 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline void fill(struct task_ref *r, struct task_struct *t)
{
	r->tid = t->pid;
	r->tgid = t->tgid;
	r->start_ns = t->start_boottime;
	r->kthread = (t->flags & PF_KTHREAD) != 0;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), t->comm);
}

static __always_inline int is_member(struct task_struct *t)
{
	__u32 tid = t->pid;

	return bpf_map_lookup_elem(&members, &tid) != NULL;
}

/* Quiet events wait in the ring for the next wake-up, unless it is a quarter full. Others
 * force one: the ring's own (adaptive) notification is sent only when the reader has consumed
 * everything before the record, which quiet records waiting in front prevent. */
static __always_inline __u64 submit_flags(int quiet)
{
	if (quiet && bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) <= 256 * 1024 / 4)
		return BPF_RB_NO_WAKEUP;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void emit_as(int quiet, __u32 kind, __u32 flags, __u64 epoch,
				    struct task_struct *a, struct task_struct *b)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u32 zero = 0;

	if (!e) {
		__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
		if (d)
			__sync_fetch_and_add(d, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->flags = flags;
	e->ts = bpf_ktime_get_ns();
	e->epoch = epoch;
	if (a)
		fill(&e->a, a);
	if (b)
		fill(&e->b, b);
	bpf_ringbuf_submit(e, submit_flags(quiet));
}

static __always_inline void emit(__u32 kind, __u32 flags, __u64 epoch, struct task_struct *a,
				 struct task_struct *b)
{
	emit_as(0, kind, flags, epoch, a, b);
}

/* Softirqs that ksoftirqd runs are its own work; others borrow whoever was running. */
static __always_inline int is_ksoftirqd(struct task_struct *t)
{
	return t->flags & PF_KTHREAD && t->comm[0] == 'k' && t->comm[1] == 's' && t->comm[2] == 'o' &&
	       t->comm[3] == 'f' && t->comm[4] == 't';
}

static __always_inline __u32 role_of(__u32 tid)
{
	__u32 *r = bpf_map_lookup_elem(&partners, &tid);
	return r ? *r : 0;
}

static __always_inline void start_episode(struct state *st, struct task_struct *waker,
					  struct task_struct *ui, __u32 flags)
{
	__u64 epoch = __sync_fetch_and_add(&st->epoch, 1) + 1;
	struct hot h = { .epoch = epoch };
	__u32 tid = ui->pid;

	st->start_ns = bpf_ktime_get_ns();
	st->ui_tid = tid;
	st->open = 1;
	bpf_map_update_elem(&hot, &tid, &h, BPF_ANY);
	emit_as(is_member(ui) && (!waker || is_member(waker)), EV_START, flags, epoch, waker, ui);
}

/* The episode's hot entry for `tid`, or NULL when it was not reached in `epoch`. */
static __always_inline struct hot *hot_in(__u32 tid, __u64 epoch)
{
	struct hot *h = bpf_map_lookup_elem(&hot, &tid);
	return h && h->epoch == epoch ? h : NULL;
}

static __always_inline int in_family(struct config *cfg, __u32 tgid)
{
	return tgid == cfg->fg_tgid || bpf_map_lookup_elem(&family, &tgid) != NULL;
}

static __always_inline int is_display(struct config *cfg, struct task_struct *t)
{
	return role_of(t->pid) & ROLE_DISPLAY && t->tgid != cfg->fg_tgid;
}

/* `waker` woke a display thread: reported once per (episode, waker, display). The episode stays
 * open: a browser's UI thread asks the X server things before its renderer has drawn, so the
 * first display wake-up is not the frame; userspace ends the episode (config.closed_epoch) when
 * no work the input handed to another process of the family is still under way. Not quiet:
 * resolving drops the provisional members, which must leave the members map before the next
 * input, or their next edge would be quiet and come late. */
static __always_inline void record_display(struct state *st, struct task_struct *waker,
					   struct task_struct *display, __u32 flags)
{
	struct edge_key k = { .epoch = st->epoch, .waker = waker->pid, .wakee = display->pid };
	__u64 one = 1;

	if (bpf_map_update_elem(&edges, &k, &one, BPF_NOEXIST) == 0)
		emit(EV_DISPLAY, flags, k.epoch, waker, display);
}

static __always_inline void record_edge(struct config *cfg, struct state *st,
					struct task_struct *waker, struct task_struct *wakee,
					struct hot *wh)
{
	struct edge_key k = { .epoch = st->epoch, .waker = waker->pid, .wakee = wakee->pid };
	__u64 one = 1, *n;
	__u32 tid = wakee->pid;

	if (is_display(cfg, wakee)) {
		record_display(st, waker, wakee, 0);
		return;
	}
	if (bpf_map_update_elem(&edges, &k, &one, BPF_NOEXIST) == 0) {
		emit_as(is_member(wakee), EV_EDGE, 0, k.epoch, waker, wakee);
	} else {
		n = bpf_map_lookup_elem(&edges, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
	if (!hot_in(tid, k.epoch) && wh->depth < cfg->max_depth) {
		struct hot h = { .epoch = k.epoch, .depth = wh->depth + 1 };
		bpf_map_update_elem(&hot, &tid, &h, BPF_ANY);
	}
}

/* Within the episode timeout after the last input: while an input's work may still run. */
static __always_inline int input_recent(struct config *cfg, struct state *st, __u64 now)
{
	return st->epoch && now - st->start_ns <= cfg->timeout_ns;
}

/*
 * The hand-off rule (docs/tracker.md, "Hand-offs"): seed 003's cycle — reached from a critical
 * thread and leading back to one — followed outside the episode too, for as long as an input's
 * work may run. A member waking a non-member thread of the family records the hand-off; that
 * thread waking a member of its own process reports it (EV_LOOP), once: userspace then makes it
 * a member. The member woken may be the one that handed the work (a pool thread replying to its
 * compositor) or another (the GPU process's IO thread passing a renderer's frame to viz); a
 * thread that answers only into another process (a network service replying to the browser) or
 * never wakes a member (a logger, an unawaited writer) is never reported. `mates`: `cur` and
 * `p` are threads of one process; `now`: the wake-up's time.
 */
static __always_inline void handoff(struct config *cfg, struct state *st,
				    struct task_struct *cur, struct task_struct *p, int mates,
				    __u64 now)
{
	__u64 *since;
	__u32 tid;

	if (cur->flags & PF_KTHREAD || !in_family(cfg, p->tgid))
		return;
	if (!input_recent(cfg, st, now))
		return;
	if (is_member(cur)) {
		if (is_member(p))
			return;
		tid = p->pid;
		bpf_map_update_elem(&handoffs, &tid, &now, BPF_ANY);
		return;
	}
	if (!mates || !is_member(p))
		return;
	tid = cur->pid;
	since = bpf_map_lookup_elem(&handoffs, &tid);
	if (!since || now - *since > cfg->timeout_ns)
		return;
	bpf_map_delete_elem(&handoffs, &tid);
	emit(EV_LOOP, 0, st->epoch, cur, p);
}

static __always_inline int on_wake(struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct state *st = bpf_map_lookup_elem(&state, &zero);
	struct irq_ctx *ic;
	struct hot *wh;
	int mates, quiet;
	__u64 now;

	if (!cfg || !st || !cfg->fg_tgid || cur->pid == p->pid)
		return 0;
	now = bpf_ktime_get_ns();
	/* Nearly every wake-up system-wide: neither into the app, nor between threads of one
	 * process, nor during an episode, nor a member's shortly after an input (a hand-off to
	 * another process of the family). Every branch below needs one of these, so this returns
	 * what they would, sooner: the last costs a member lookup, only in the episode timeout
	 * after an input. */
	mates = cur->tgid == p->tgid;
	quiet = !mates && p->tgid != cfg->fg_tgid &&
		(!st->open || st->epoch == cfg->closed_epoch);
	if (quiet && !(input_recent(cfg, st, now) && is_member(cur)))
		return 0;
	ic = bpf_map_lookup_elem(&irq_ctx, &zero);
	if (!ic)
		return 0;
	if (ic->hard || ic->timer || (ic->soft && !is_ksoftirqd(cur))) {
		/* `current` is whoever was interrupted: never a waker. An input device's interrupt
		 * waking the app is an input (scx_lavd's signal); a disk's or a timer's is not. */
		if (cfg->irq_starts && p->tgid == cfg->fg_tgid && !ic->timer && ic->dev)
			start_episode(st, NULL, p, EVF_IRQ);
		return 0;
	}
	handoff(cfg, st, cur, p, mates, now);
	if (quiet)
		return 0;
	if (p->tgid == cfg->fg_tgid && cur->tgid != cfg->fg_tgid &&
	    role_of(cur->pid) & ROLE_INPUT) {
		start_episode(st, cur, p, 0);
		return 0;
	}
	if (!st->open || st->epoch == cfg->closed_epoch || !input_recent(cfg, st, now))
		return 0;
	wh = hot_in(cur->pid, st->epoch);
	if (wh)
		record_edge(cfg, st, cur, p, wh);
	else if (is_display(cfg, p) && in_family(cfg, cur->tgid))
		record_display(st, cur, p, EVF_FAMILY); /* a frame producer, woken by a timer */
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(ux_waking, struct task_struct *p)
{
	return on_wake(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(ux_wakeup_new, struct task_struct *p)
{
	return on_wake(p);
}

/* On-CPU time of the episode's threads, for the daemon's budget and the report. */
SEC("tp_btf/sched_switch")
int BPF_PROG(ux_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct state *st = bpf_map_lookup_elem(&state, &zero);
	__u64 now;
	struct hot *h;

	if (!st || !st->open)
		return 0;
	now = bpf_ktime_get_ns();
	h = hot_in(prev->pid, st->epoch);
	if (h && h->since_ns) {
		h->ran_ns += now - h->since_ns;
		h->since_ns = 0;
	}
	h = hot_in(next->pid, st->epoch);
	if (h)
		h->since_ns = now;
	return 0;
}

/* A new process of the family joins it here (fork copies the uid; userspace drops it if an
 * exec changes it), so a zygote's renderer counts before userspace hears of it. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ux_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 zero = 0, tid = parent->pid, ctid = child->pid, one = 1;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	__u32 *role = bpf_map_lookup_elem(&partners, &tid);
	int fam = cfg && cfg->fg_tgid && in_family(cfg, parent->tgid);

	if (role) {
		__u32 r = *role;
		bpf_map_update_elem(&partners, &ctid, &r, BPF_ANY);
	}
	if (fam && child->pid == child->tgid)
		bpf_map_update_elem(&family, &ctid, &one, BPF_ANY);
	if (role || fam)
		emit(EV_FORK, 0, 0, parent, child);
	return 0;
}

/* Exec and rename are rare system-wide: all are reported, so userspace can match the configured
 * input/display names and the app's identity. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(ux_exec, struct task_struct *p)
{
	emit(EV_EXEC, 0, 0, p, NULL);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(ux_rename, struct task_struct *task, const char *comm)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_RENAME;
	e->ts = bpf_ktime_get_ns();
	fill(&e->a, task);
	bpf_probe_read_kernel_str(e->a.comm, sizeof(e->a.comm), comm);
	/* Forced: the ring's own notification is skipped while quiet records wait in front, and
	 * a dispatcher named after its creation was then unknown — no episode started — until
	 * another event woke the tracker (the first inputs of a fresh app went unboosted for up
	 * to ~100 ms). */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ux_process_exit, struct task_struct *p)
{
	__u32 zero = 0, tid = p->pid;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	int partner = bpf_map_delete_elem(&partners, &tid) == 0;
	int was_hot = bpf_map_delete_elem(&hot, &tid) == 0;
	int fam = cfg && cfg->fg_tgid && in_family(cfg, p->tgid);

	if (fam && p->pid == p->tgid)
		bpf_map_delete_elem(&family, &tid);
	if (partner || was_hot || fam)
		emit(EV_EXIT, 0, 0, p, NULL);
	return 0;
}

static __always_inline void count(__u32 *field, int delta)
{
	if (delta > 0)
		*field += 1;
	else if (*field > 0) /* an exit whose entry came before we attached */
		*field -= 1;
}

static __always_inline struct irq_ctx *this_cpu_ctx(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&irq_ctx, &zero);
}

#define BRACKET(tp, field, delta, extra)        \
	SEC("tp_btf/" #tp)                      \
	int BPF_PROG(ux_##tp)                   \
	{                                       \
		struct irq_ctx *c = this_cpu_ctx(); \
		if (c) {                        \
			count(&c->field, delta); \
			extra;                  \
		}                               \
		return 0;                       \
	}

static __always_inline int irq_handler(int irq, int delta)
{
	__u32 key = irq;
	struct irq_ctx *c = this_cpu_ctx();

	if (!c)
		return 0;
	count(&c->hard, delta);
	if (bpf_map_lookup_elem(&input_irqs, &key))
		count(&c->dev, delta);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(ux_irq_handler_entry, int irq)
{
	return irq_handler(irq, 1);
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(ux_irq_handler_exit, int irq)
{
	return irq_handler(irq, -1);
}

BRACKET(irq_work_entry, hard, 1, )
BRACKET(irq_work_exit, hard, -1, )
BRACKET(softirq_entry, soft, 1, )
BRACKET(softirq_exit, soft, -1, )
BRACKET(hrtimer_expire_entry, timer, 1, )
BRACKET(hrtimer_expire_exit, timer, -1, )
BRACKET(timer_expire_entry, timer, 1, )
BRACKET(timer_expire_exit, timer, -1, )
