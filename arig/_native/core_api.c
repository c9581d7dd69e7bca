/* The core's calls of the threads other than its own (see core.c for who calls what): creating and
 * starting it, the loop's pushes and reads, the Python fill gate, stopping and freeing it.
 */
#include "core.h"


#define ARIG_CORE_ABI 8

#ifndef ARIG_CORE_SOURCE
#define ARIG_CORE_SOURCE "unknown"
#endif
int arig_core_abi(void) { return ARIG_CORE_ABI; }
/* The sha256 prefix of the sources (every .c and .h beside this file) it was built from (set by setup.py). */
const char *arig_core_source(void) { return ARIG_CORE_SOURCE; }

core_t *core_new(const lane_ops *ops, int nlanes, const uint64_t *words, int efd, uint64_t cap, int64_t spin_ns, int64_t idle_ns,
                 int64_t lead_ns, int prewake) {
    if (nlanes < 1 || nlanes > MAX_LANES || (cap & (cap - 1)) || cap < 2)
        return 0;
    core_t *c = calloc(1, sizeof *c);
    if (!c)
        return 0;
    c->ring = calloc(cap, sizeof(item_t));
    if (!c->ring) {
        free(c);
        return 0;
    }
    c->ops = ops;
    c->cap = cap;
    c->nlanes = nlanes;
    c->efd = efd;
    c->spin_ns = spin_ns;
    c->idle_ns = idle_ns;
    c->idle_win = (double)idle_ns;
    c->lead_ns = lead_ns;
    c->prewake = prewake;
    atomic_store(&c->py_short_ns, (int64_t)LONG_WORK_NS);
    c->wake_est[0] = 30000.0;
    c->wake_est[1] = 60000.0;
    c->wake_est[2] = 100000.0;
    atomic_store(&c->armed, 1);
    for (int i = 0; i < nlanes; i++)
        c->lanes[i].word = (volatile uint64_t *)(uintptr_t)words[i];
    return c;
}

int arig_core_start(core_t *c) {
    int rc = pthread_create(&c->th, 0, core_run, c);
    c->started = rc == 0;
    return rc;
}

/* Loop thread.  0, or -1 when the ring is full. */
int arig_core_push(core_t *c, uint32_t kind_lane, uint64_t v, uint64_t a, uint64_t b, uint64_t cc) {
    uint32_t kind = kind_lane & 0xff, lane = kind_lane >> 8;
    uint64_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&c->tail, memory_order_acquire) >= c->cap)
        return -1;
    item_t *it = &c->ring[h & (c->cap - 1)];
    it->kind = kind;
    it->lane = lane;
    it->v = v;
    it->a = a;
    it->b = b;
    it->c = cc;
    atomic_store_explicit(&c->head, h + 1, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    wake_native(c);
    return 0;
}

/* Addresses the loop reads directly (each an aligned word): 0 tail, 1 fault (int32),
 * 2 lane's host-written word, 3 lane's progress time, 4 the value that time is of. */
void *arig_core_addr(core_t *c, int which, int lane) {
    switch (which) {
    case 0: return (void *)&c->tail;
    case 1: return (void *)&c->fault;
    case 2: return (void *)&c->lanes[lane].hword;
    case 3: return (void *)&c->lanes[lane].t_ns;
    case 4: return (void *)&c->lanes[lane].t_v;
    default: return 0;
    }
}

/* Before arig_core_start: how long work is watched (see struct core). */
void arig_core_tune(core_t *c, int early_backstop, int64_t poll_ns) {
    c->no_early_backstop = !early_backstop;
    c->poll_ns = poll_ns > 0 ? poll_ns : 0;
}

/* Any thread, any time: Python fills predicted at most ns long share gates (default: short work,
 * LONG_WORK_NS); ns < 0: every Python fill, whatever its prediction (tests: a fake driver's fills,
 * however slowly the machine runs them). */
void arig_core_py_short(core_t *c, int64_t ns) { atomic_store(&c->py_short_ns, ns); }

/* Before arig_core_start: the loop's spin window opens ahead_ns before a predicted end (see
 * struct core); a loop woken further ahead than that is woken again, nearer the end.  seen: the
 * loop's view of each lane (nlanes words it writes as it delivers, alive as long as the core). */
void arig_core_loop_window(core_t *c, int64_t ahead_ns, const uint64_t *seen) {
    c->loop_ahead_ns = ahead_ns > 0 ? ahead_ns : 0;
    c->loop_seen = seen;
}

/* Loop thread: its steps from a pre-wake to its spin in the window take about ns (see struct core). */
void arig_core_loop_lead(core_t *c, int64_t ns) {
    atomic_store_explicit(&c->loop_lead_ns, ns < 0 ? 0 : ns > LOOP_LEAD_MAX_NS ? LOOP_LEAD_MAX_NS : ns, memory_order_relaxed);
}

/* Any thread: start the loop's wake-up figure after a sleep of bucket's length (core.c's
 * wake_bucket: 0 short, 1 mid, 2 long) from ns; the native thread takes it on its next turn and
 * learns on from it.  For tests, and for a loop that measured its own wake-up. */
void arig_core_wake_seed(core_t *c, int bucket, int64_t ns) {
    if (bucket >= 0 && bucket < WAKE_BUCKETS && ns > 0)
        atomic_store(&c->wake_seed[bucket], ns);
}

/* Loop thread: ask for a wake-up once the native thread takes items (then re-check). */
void arig_core_want_space(core_t *c) {
    atomic_store(&c->space_wanted, 1);
    atomic_thread_fence(memory_order_seq_cst);
}

/* Loop thread, in its eventfd reader: re-arm with a full barrier (then read the lanes). */
void arig_core_arm(core_t *c) {
    /* Only the first arm after a pre-wake is its wake-up (a spin in the window arms again later). */
    if (atomic_load_explicit(&c->t_armed, memory_order_relaxed) < atomic_load_explicit(&c->prewoke_at, memory_order_relaxed))
        atomic_store_explicit(&c->t_armed, now_ns(), memory_order_relaxed);
    atomic_exchange(&c->armed, 1);
    atomic_thread_fence(memory_order_seq_cst);
}

int32_t arig_core_fault(core_t *c, uint32_t *lane, uint64_t *v) {
    int32_t f = atomic_load(&c->fault);
    if (f) {
        *lane = atomic_load(&c->fault_lane);
        *v = atomic_load(&c->fault_v);
    }
    return f;
}

uint64_t arig_core_due(core_t *c) { return atomic_load_explicit(&c->due, memory_order_relaxed); }

/* Loop thread: a stamp kind's last release on CLOCK_MONOTONIC (its GPU time and the clocks' offset
 * learned so far), for a value the loop read before the native thread stamped it; 0: unknown. */
uint64_t arig_core_gpu_time(core_t *c, int lane) {
    if (lane < 0 || lane >= c->nlanes || !c->ops->stamp || !c->gpu_cal)
        return 0;
    uint64_t g = c->ops->stamp(&c->lanes[lane]), now = now_ns();
    uint64_t s = g + (uint64_t)(*(volatile int64_t *)&c->gpu_off);
    return g && s < now ? s : (g ? now : 0);
}

/* Loop thread, just before it would block (the GIL released by the caller):
 * spin up to ns for lane progress past seen[i]; the eventfd is not written
 * meanwhile.  Returns 1 on progress.  Re-arms before returning without it. */
/* The loop's spin saw progress: note what, for the native thread (loop_behind), then return 1. */
static int saw(core_t *c) {
    for (int i = 0; i < c->nlanes; i++)
        atomic_store(&c->loop_saw[i], lane_done(&c->lanes[i]));
    return 1;
}

int arig_core_loop_spin(core_t *c, const uint64_t *seen, int64_t ns) {
    atomic_store(&c->armed, 0);
    uint64_t end = now_ns() + (uint64_t)ns;
    for (;;) {
        for (int i = 0; i < c->nlanes; i++)
            if (lane_done(&c->lanes[i]) > seen[i])
                return saw(c);
        uint64_t t = now_ns(), due = atomic_load_explicit(&c->due, memory_order_relaxed);
        if (atomic_load(&c->fault) || t > end || due > end)
            break; /* out of time, or the completion is predicted past the window */
        cpu_relax();
    }
    atomic_exchange(&c->armed, 1);
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < c->nlanes; i++)
        if (lane_done(&c->lanes[i]) > seen[i])
            return saw(c);
    return 0;
}

/* Loop thread: hold (1) the eventfd writes while the loop is awake and reads the lanes before it
 * can next block (a look it queued behind what it has ready), or release them (0): re-arm with a
 * full barrier, then the caller reads the lanes, as after a wake-up.  A completion that comes
 * while they are held is found by that read, without a write, a poll and a read of the eventfd.
 * Unlike arig_core_arm, never taken for a wake-up (t_armed: the pre-wakes' learning). */
void arig_core_hold(core_t *c, int hold) {
    if (hold) {
        atomic_store(&c->armed, 0);
        return;
    }
    atomic_exchange(&c->armed, 1);
    atomic_thread_fence(memory_order_seq_cst);
}

/* Has the native thread opened the gate to the Python fill of value v (it opens it for every fill
 * next in its ring at once: values up to py_at)?  1: yes; -1: lost or stopping (it skips it); 0: not yet. */
static int py_gate(core_t *c, uint64_t v) {
    if (atomic_load(&c->py_at) >= v)
        return 1;
    return atomic_load(&c->stop) || atomic_load(&c->fault) || !c->started ? -1 : 0;
}

/* The Python submit thread, before a Python fill of value v: wait (GIL released)
 * until the native thread reaches it.  0: run it; -1: lost or stopping, skip it. */
int arig_core_py_begin(core_t *c, uint64_t v) {
    for (;;) {
        uint32_t f = atomic_load(&c->pyw);
        int g = py_gate(c, v);
        if (g)
            return g > 0 ? 0 : -1;
        futex(&c->pyw, FUTEX_WAIT_PRIVATE, f, 0);
    }
}

/* The Python submit thread, GIL held: spin up to spin_ns for the native thread to reach the
 * Python fill of value v (the one before it just ended: it usually gets there within a few
 * microseconds, and a wait with the GIL released would hand the GIL to the loop and back).
 * 1: run it; 0: not there yet (wait with arig_core_py_begin); -1: lost or stopping, skip it. */
int arig_core_py_ready(core_t *c, uint64_t v, int64_t spin_ns) {
    uint64_t end = now_ns() + (uint64_t)(spin_ns > 0 ? spin_ns : 0);
    for (;;) {
        int g = py_gate(c, v);
        if (g || now_ns() >= end)
            return g;
        cpu_relax();
    }
}

void arig_core_py_end(core_t *c, uint64_t v, int32_t rc) {
    if (rc) { /* the code first: a native thread that sees py_failed reads it */
        atomic_store(&c->py_rc, rc);
        atomic_store(&c->py_failed, v);
    }
    atomic_store(&c->py_done, v);
    atomic_thread_fence(memory_order_seq_cst);
    atomic_fetch_add(&c->fw, 1);
    atomic_store(&c->sleeping, 0);
    futex(&c->fw, FUTEX_WAKE_PRIVATE, 1, 0);
}

/* Loop thread: the device is lost elsewhere (a hang, a Python fill): run nothing more. */
void arig_core_abort(core_t *c) { set_fault(c, -2, 0, 0); }

/* Stop the native thread and join it (GIL released by the caller). */
void arig_core_stop(core_t *c) {
    atomic_store(&c->stop, 1);
    halt_lanes(c);
    atomic_fetch_add(&c->fw, 1);
    futex(&c->fw, FUTEX_WAKE_PRIVATE, 1, 0);
    atomic_fetch_add(&c->pyw, 1);
    futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0);
    if (c->started) {
        pthread_join(c->th, 0);
        c->started = 0;
    }
    if (c->ops->stopped)
        c->ops->stopped(c);
}

/* Free the core.  Only once no host function can still run (its streams are idle). */
void arig_core_destroy(core_t *c) {
    if (!c)
        return;
    arig_core_stop(c);
    if (c->ops->destroy)
        c->ops->destroy(c);
    free(c->ring);
    free(c);
}

void arig_core_stats(core_t *c, uint64_t *out, int n) {
    for (int i = 0; i < n && i < S_NSTATS; i++)
        out[i] = atomic_load(&c->stats[i]);
    /* Then gauges the native thread learned (read racily: for probes): the loop's wake-up time
     * after a pre-wake, by how long it slept (short, mid, long), and how late its own timed
     * sleeps end. */
    for (int i = 0; i < WAKE_BUCKETS; i++)
        if (n > S_NSTATS + i)
            out[S_NSTATS + i] = (uint64_t)c->wake_est[i];
    if (n > S_NSTATS + WAKE_BUCKETS)
        out[S_NSTATS + WAKE_BUCKETS] = (uint64_t)(c->over > 0 ? c->over : 0);
}
