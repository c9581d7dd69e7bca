/* arig's native core: a device's submit and completion thread, without Python.
 *
 * Plain C ABI, no Python.h: arig loads it with ctypes.  One core per device.
 *
 * Who calls what:
 *   - the event-loop thread: arig_core_push, arig_core_arm, arig_core_want_space,
 *     arig_core_addr, arig_core_fault, arig_core_due, arig_core_loop_spin
 *     (all non-blocking but the last, which spins for a bounded time);
 *   - the Python submit thread (Python fills, open and close):
 *     arig_core_create, arig_core_start, arig_core_py_begin (blocks),
 *     arig_core_py_end, arig_core_stop (joins), arig_core_destroy;
 *   - the core's own thread ("arig-native"): everything in run(); it is the
 *     only thread that launches, copies or signals on the device's streams;
 *   - libcuda's callback thread: hostfn() only (no CUDA call, no lock).
 *
 * Submission: the loop pushes fixed-size items into a single-producer
 * single-consumer ring and wakes the native thread with a futex only if it
 * announced that it sleeps (io_uring SQPOLL's need-wakeup flag).
 *
 * Completion: after each burst the native thread asks the GPU to write the
 * burst's last value into the lane's word in mapped host memory
 * (cuStreamWriteValue64); inside a burst of work known to be long, after each
 * item too, so that its progress shows.  Where stream memory operations are missing, a host
 * function writes it instead (hword), after the GPU ran the work before it.
 * Only the GPU and host functions ever write a completion: no wake-up, kick,
 * timeout or poll is taken for one.  While work is in flight the native
 * thread watches the words: a timed sleep (1 us timer slack) until shortly
 * before the predicted completion, then a bounded spin; when the spin gives up
 * a host function is enqueued as the backstop.  Progress is told to the loop
 * by writing its eventfd, only while the loop is armed (libuv's
 * uv_async_send coalescing); the loop re-arms with a full barrier and reads
 * the words again, so no completion is lost between the two.
 *
 * Faults: after FAULT_CHECK_NS without progress the native thread asks
 * cuStreamQuery of each busy lane, and publishes the first error code.
 *
 * The NV device (arig.nvrm: NVIDIA's kernel driver, no libcuda) runs on the same core
 * (arig_core_create_nv): its lanes are GPFIFO channels (arig_nvq, nv_channel.c and lanes_nv.c), a
 * burst's value is a semaphore release the GPU writes (with its timer) into the lane's word,
 * the backstop is a NON_STALL_INTERRUPT after the value, which wakes the driver's event fd
 * that the loop reads, asked for when a spin gives up and before a sleep on long work, and a
 * fault is a change of the channel's error notifier.
 */
#include "core.h"
#include "nv_channel.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARIG_CORE_ABI 3
#define MAX_LANES 64
#define BURST 32
#define FAULT_CHECK_NS 20000000ull /* 20 ms without progress: ask the driver */
#define PY_POLL_NS 50000ull        /* while a Python fill runs, look at the words this often */
#define LONG_WORK_NS 50000.0       /* predicted longer than this: sleep before spinning */
#define MIN_SLEEP_NS 15000ull
#define PREWAKE_MARGIN_NS 20000ull /* pre-wake the loop this much earlier than it takes to wake */
#define WAKE_EST_MAX_NS 500000.0
#define IDLE_MAX_NS 150000.0 /* the idle spin grows to cover the loop's usual gap up to this, never more */

typedef int CUresult;
typedef struct arig_cuda {
    CUresult (*ctx_set_current)(void *ctx);
    CUresult (*launch_kernel)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              unsigned shared, void *stream, void **params, void **extra);
    CUresult (*write_value64)(void *stream, uint64_t addr, uint64_t value, unsigned flags);
    CUresult (*launch_host_func)(void *stream, void (*fn)(void *), void *user);
    CUresult (*stream_query)(void *stream);
    CUresult (*graph_launch)(void *exec, void *stream);
    CUresult (*memcpy_htod)(uint64_t dst, const void *src, size_t n, void *stream);
    CUresult (*memcpy_dtoh)(void *dst, uint64_t src, size_t n, void *stream);
    CUresult (*exchange_capture_mode)(int *mode); /* may be NULL */
    CUresult (*event_create)(void **event, unsigned flags);
    CUresult (*event_record)(void *event, void *stream);
    CUresult (*stream_wait_event)(void *stream, void *event, unsigned flags);
} arig_cuda;

/* A prepared kernel launch (arig.cuda.Launch keeps one). */
typedef struct arig_launch {
    void *func;
    uint32_t grid[3], block[3], shared, pad;
    void **extra;
} arig_launch;

/* K_MARK: no work (the value marks the lane's earlier work).  K_JOIN: the lane waits for
 * another stream's work: a = that stream, b = the address of its event slot (made here on first
 * use), c = 1 to record the event on a first, 0 when the slot holds an event recorded elsewhere. */
enum { K_CFILL = 1, K_LAUNCH = 2, K_GRAPH = 3, K_H2D = 4, K_D2H = 5, K_PY = 6, K_MARK = 7, K_JOIN = 8 };

typedef struct item {
    uint32_t kind, lane;
    uint64_t v, a, b, c;
} item_t;

typedef int (*fill_fn)(void *queue, void *arg, uint64_t v);


typedef struct lane {
    void *stream;
    arig_nvq *nq;             /* an NV device's queue (stream unused) */
    volatile uint64_t *ts;    /* NV: the GPU time the release wrote after the word */
    volatile uint64_t *word; /* written by the GPU */
    uint64_t word_dev;
    _Atomic uint64_t hword;  /* written by host functions */
    _Atomic uint64_t t_ns;   /* CLOCK_MONOTONIC when progress was last seen */
    _Atomic uint64_t t_v;    /* the value t_ns is the time of (written after t_ns) */
    /* the native thread's own */
    uint64_t pend, out, seen, backstop, t_sig, slept_for, prewoke_for, t_look;
    uint64_t insured; /* NV: the value an interrupt was asked for before a sleep (the driver's event fd tells the loop) */
    uint64_t key, pend_key; /* what the in-flight burst (and the next) ends with: the estimate's key */
    double est;             /* predicted ns from t_sig to the burst's completion */
} lane_t;

/* Predicted durations, by what a burst ends with (a launch record, a graph, a C fill):
 * one lane runs work of very different lengths.  lo/hi: bounds learned from misses and
 * early finds since the last hit (0: unknown). */
#define EST_SLOTS 256
typedef struct est {
    uint64_t key, hits;
    double est, lo, hi;
} est_t;

enum { S_EFD_WRITES, S_HOSTFNS, S_FUTEX_WAKES, S_SPIN_HITS, S_SPIN_MISSES, S_EARLY, S_ITEMS, S_PREWAKES, S_QUERIES, S_NSTATS };

typedef struct core {
    _Atomic uint64_t head;
    char pad0[56];
    _Atomic uint64_t tail;
    char pad1[56];
    _Atomic uint32_t armed, sleeping, fw, stop, space_wanted, pyw;
    _Atomic int32_t fault;
    _Atomic uint32_t fault_lane;
    _Atomic uint64_t fault_v;
    _Atomic uint64_t py_at, py_done;
    _Atomic int32_t py_rc;
    _Atomic uint64_t due; /* CLOCK_MONOTONIC of the soonest predicted completion, 0: none */
    _Atomic uint32_t loop_spinning;
    uint64_t cap;
    item_t *ring;
    int efd, nlanes, memops, prewake, started, nv;
    int64_t gpu_off; /* NV: CLOCK_MONOTONIC minus the GPU's timer, at most (learned from looks) */
    int gpu_cal;
    int64_t spin_ns, idle_ns, lead_ns;
    double idle_win; /* this idle spin's length: idle_ns, or longer where the next push usually comes a bit later */
    _Atomic uint64_t t_armed; /* when the loop last re-armed (its own clock read) */
    uint64_t t_prewake;       /* when the last pre-wake wrote the eventfd (0: none pending) */
    double wake_est;          /* how long the loop takes to wake up, learned from pre-wakes */
    void *ctx;
    arig_cuda cu;
    pthread_t th;
    _Atomic uint64_t stats[S_NSTATS];
    est_t ests[EST_SLOTS];
    lane_t lanes[MAX_LANES];
} core_t;

typedef struct hrec {
    core_t *c;
    uint32_t lane;
    uint64_t v;
} hrec_t;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long futex(_Atomic uint32_t *a, int op, uint32_t v, const struct timespec *ts) {
    return syscall(SYS_futex, a, op, v, ts, 0, 0);
}

static inline void stat_add(core_t *c, int k) { atomic_fetch_add_explicit(&c->stats[k], 1, memory_order_relaxed); }

/* Wake the loop if it is armed: at most one eventfd write per loop wake-up. */
static void kick(core_t *c) {
    if (atomic_exchange(&c->armed, 0)) {
        uint64_t one = 1;
        ssize_t r = write(c->efd, &one, sizeof one);
        (void)r; /* EAGAIN: the counter is saturated, the loop is awake anyway */
        stat_add(c, S_EFD_WRITES);
    }
}

static void wake_native(core_t *c) {
    if (atomic_load(&c->sleeping)) {
        atomic_store(&c->sleeping, 0);
        atomic_fetch_add(&c->fw, 1);
        futex(&c->fw, FUTEX_WAKE_PRIVATE, 1, 0);
        stat_add(c, S_FUTEX_WAKES);
    }
}

/* Release v into the timeline word after all work so far (both queues'), and submit. */
static int nv_signal(arig_nvq *q, uint64_t v) {
    int rc = nv_after_peer(q);
    return rc ? rc : arig_nv_kick(q, v, 1, 0, 0);
}

static inline uint64_t lane_done(lane_t *l) {
    uint64_t w = l->word ? *l->word : 0, h = atomic_load_explicit(&l->hword, memory_order_acquire);
    return w > h ? w : h;
}

/* The host function: runs on libcuda's callback thread after the work before it. */
static void hostfn(void *p) {
    hrec_t *r = (hrec_t *)p;
    core_t *c = r->c;
    lane_t *l = &c->lanes[r->lane];
    uint64_t v = r->v, h = atomic_load(&l->hword);
    free(r);
    while (h < v && !atomic_compare_exchange_weak(&l->hword, &h, v)) {
    }
    atomic_store(&l->t_ns, now_ns());
    atomic_store(&l->t_v, v); /* host functions of a lane run in order: v only grows */
    atomic_thread_fence(memory_order_seq_cst);
    kick(c);
    wake_native(c);
}

static void set_fault(core_t *c, int32_t code, uint32_t lane, uint64_t v) {
    int32_t zero = 0;
    for (int i = 0; i < c->nlanes; i++)
        if (c->lanes[i].nq)
            atomic_store(&c->lanes[i].nq->halt, 1); /* a wait for ring room ends */
    if (atomic_compare_exchange_strong(&c->fault, &zero, code)) {
        atomic_store(&c->fault_lane, lane);
        atomic_store(&c->fault_v, v);
    }
    atomic_fetch_add(&c->pyw, 1);
    futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0); /* a Python fill waiting at the gate */
    atomic_thread_fence(memory_order_seq_cst);
    atomic_store(&c->armed, 1); /* a fault is always told */
    kick(c);
}

static int host_signal(core_t *c, int li, uint64_t v) {
    if (c->nv) /* the NV backstop: an interrupt once the word holds v, which wakes the loop's driver event fd */
        return arig_nv_kick(c->lanes[li].nq, 0, 0, 1, v);
    hrec_t *r = malloc(sizeof *r);
    if (!r)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    r->c = c;
    r->lane = (uint32_t)li;
    r->v = v;
    CUresult rc = c->cu.launch_host_func(c->lanes[li].stream, hostfn, r);
    if (rc)
        free(r);
    else
        stat_add(c, S_HOSTFNS);
    return rc;
}

static est_t *est_of(core_t *c, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    est_t *e = &c->ests[(h >> 32) % EST_SLOTS];
    if (e->key != key) {
        e->key = key;
        e->hits = 0;
        e->est = e->lo = e->hi = 0;
    }
    return e;
}

/* What an item's duration is predicted by: a kernel with its grid (whatever its arguments),
 * a graph, a C fill, a copy's kind and size. */
static uint64_t item_key(const core_t *c, const item_t *it) {
    uint64_t k = it->a;
    if (it->kind == K_LAUNCH && c->nv) {
        k = ((const arig_nv_launch_rec *)(uintptr_t)it->a)->key;
    } else if (it->kind == K_LAUNCH) {
        const arig_launch *l = (const arig_launch *)(uintptr_t)it->a;
        k = (uint64_t)(uintptr_t)l->func ^ ((uint64_t)l->grid[0] << 20) ^ ((uint64_t)l->grid[1] << 40) ^ ((uint64_t)l->grid[2] << 52) ^ l->block[0];
    } else if (it->kind == K_H2D || it->kind == K_D2H) {
        k = it->c;
    }
    return k ^ ((uint64_t)it->kind << 56);
}

/* The estimate for key, without claiming its slot (0: unknown). */
static double est_peek(core_t *c, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    est_t *e = &c->ests[(h >> 32) % EST_SLOTS];
    return e->key == key ? e->est : 0;
}

/* Seen by a spin after d ns: the estimate is good; follow it. */
static void est_hit(core_t *c, lane_t *l, double d) {
    est_t *e = est_of(c, l->key);
    e->est = e->est == 0 ? d : 0.8 * e->est + 0.2 * d;
    e->lo = e->hi = 0;
    e->hits++;
    l->est = e->est;
}

/* Found done on waking at t_sig + bound: it took less.  Not done when a spin gave up at
 * t_sig + bound: it takes more.  Until a spin has seen this work complete, bisect between
 * such bounds (or step by half again); after that, nudge (its length jitters a little). */
static void est_bound(core_t *c, lane_t *l, double bound, int done) {
    est_t *e = est_of(c, l->key);
    if (e->hits) {
        if (done) {
            double step = e->est * 0.05 > 2000 ? e->est * 0.05 : 2000;
            e->est = e->est > bound ? bound : e->est - step;
        } else {
            e->est += (double)c->spin_ns / 2;
            if (e->est < bound)
                e->est = bound;
        }
        if (e->est < 0)
            e->est = 0;
        l->est = e->est;
        return;
    }
    if (done)
        e->hi = e->hi == 0 || bound < e->hi ? bound : e->hi;
    else
        e->lo = bound > e->lo ? bound : e->lo;
    if (e->lo > 0 && e->hi > 0 && e->lo >= e->hi)
        e->lo = e->hi = 0; /* the work's length moved: start over */
    if (e->lo > 0 && e->hi > 0)
        e->est = (e->lo + e->hi) / 2;
    else if (done)
        e->est = 0.7 * (e->est < bound ? e->est : bound);
    else
        e->est = 1.5 * e->est > bound ? 1.5 * e->est : bound;
    l->est = e->est;
}

/* End of a burst: have the GPU (or a host function) signal each lane's last value. */
static void signal_lanes(core_t *c) {
    uint64_t t = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        if (l->pend <= l->out)
            continue;
        CUresult rc = c->nv ? nv_signal(l->nq, l->pend) : c->memops ? c->cu.write_value64(l->stream, l->word_dev, l->pend, 0) : host_signal(c, i, l->pend);
        if (rc) {
            set_fault(c, rc, (uint32_t)i, l->pend);
            return;
        }
        if (l->out <= l->seen) { /* the lane was idle: a new prediction starts */
            l->t_sig = t ? t : (t = now_ns());
            l->key = l->pend_key;
            l->est = est_of(c, l->key)->est;
        }
        l->out = l->pend;
        l->slept_for = 0;
    }
}

static CUresult run_nv_item(core_t *c, item_t *it) {
    lane_t *l = &c->lanes[it->lane];
    switch (it->kind) {
    case K_CFILL:
        return ((fill_fn)(uintptr_t)it->a)(l->nq, (void *)(uintptr_t)it->b, it->v);
    case K_LAUNCH:
        return arig_nv_launch(l->nq, (const arig_nv_launch_rec *)(uintptr_t)it->a);
    case K_MARK:
        return 0;
    default:
        return NVE_KIND;
    }
}

static CUresult run_item(core_t *c, item_t *it) {
    lane_t *l = &c->lanes[it->lane];
    if (c->nv)
        return run_nv_item(c, it);
    switch (it->kind) {
    case K_CFILL:
        return ((fill_fn)(uintptr_t)it->a)(l->stream, (void *)(uintptr_t)it->b, it->v);
    case K_LAUNCH: {
        arig_launch *k = (arig_launch *)(uintptr_t)it->a;
        return c->cu.launch_kernel(k->func, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared,
                                   l->stream, 0, k->extra);
    }
    case K_GRAPH:
        return c->cu.graph_launch((void *)(uintptr_t)it->a, l->stream);
    case K_H2D:
        return c->cu.memcpy_htod(it->a, (const void *)(uintptr_t)it->b, (size_t)it->c, l->stream);
    case K_D2H:
        return c->cu.memcpy_dtoh((void *)(uintptr_t)it->a, it->b, (size_t)it->c, l->stream);
    case K_MARK:
        return 0;
    case K_JOIN: {
        void **slot = (void **)(uintptr_t)it->b;
        CUresult rc = 0;
        if (it->c) {
            if (!*slot)
                rc = c->cu.event_create(slot, 2); /* CU_EVENT_DISABLE_TIMING */
            if (!rc)
                rc = c->cu.event_record(*slot, (void *)(uintptr_t)it->a);
        }
        return rc ? rc : c->cu.stream_wait_event(l->stream, *slot, 0);
    }
    default:
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
}

/* NV: when the GPU released the word, on CLOCK_MONOTONIC.  The offset between the two clocks is
 * learned as the least (now - GPU time) seen: a spin sees a release within a fraction of a
 * microsecond; it is let rise slowly, so that a drift between the clocks is followed. */
static uint64_t gpu_stamp(core_t *c, lane_t *l, uint64_t now) {
    uint64_t g = *l->ts;
    if (!g)
        return now;
    int64_t cand = (int64_t)(now - g);
    if (!c->gpu_cal || cand < c->gpu_off) {
        c->gpu_off = cand;
        c->gpu_cal = 1;
    } else {
        c->gpu_off += (cand - c->gpu_off) >> 12;
    }
    uint64_t s = g + (uint64_t)c->gpu_off;
    return s < now ? s : now;
}

/* NV, before the native thread sleeps on long work: ask for an interrupt after the lane's value, so
 * that the loop learns of the completion from the driver's event fd even if the prediction is late. */
static int insure(core_t *c, int li) {
    lane_t *l = &c->lanes[li];
    if (!c->nv || l->insured >= l->out)
        return 0;
    l->insured = l->out;
    return arig_nv_kick(l->nq, 0, 0, 1, l->out);
}

/* Look at every lane's completion; tell the loop of progress.  Returns 1 on progress. */
static int look(core_t *c, uint64_t now) {
    int progressed = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        uint64_t d = lane_done(l);
        if (d > l->seen) {
            uint64_t t = atomic_load(&l->t_ns);
            if (t <= l->t_look || atomic_load(&l->t_v) < d) { /* no host function stamped this progress: seen now */
                atomic_store(&l->t_ns, t = l->ts ? gpu_stamp(c, l, now) : now);
                atomic_store(&l->t_v, d);
            }
            l->t_look = t;
            if (l->ts && c->gpu_cal && d >= l->out && l->out > l->seen && t > l->t_sig)
                /* NV: the burst in flight is done, and the GPU's time says when: learn its length
                 * exactly, however it was found (a spin, a timed wake, a push after the loop heard
                 * of it from the driver's event fd). */
                est_hit(c, l, (double)(t - l->t_sig));
            l->seen = d;
            progressed = 1;
        }
    }
    if (progressed)
        kick(c);
    return progressed;
}

static int busy(core_t *c) {
    for (int i = 0; i < c->nlanes; i++)
        if (c->lanes[i].out > c->lanes[i].seen)
            return 1;
    return 0;
}

static void check_faults(core_t *c) {
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        if (l->out <= l->seen)
            continue;
        CUresult rc = c->nv ? (nv_channel_error(l->nq) ? NVE_CHANNEL : 0) : c->cu.stream_query(l->stream);
        stat_add(c, S_QUERIES);
        if (rc != 0 && rc != 600) { /* CUDA_ERROR_NOT_READY */
            set_fault(c, rc, (uint32_t)i, l->seen + 1);
            return;
        }
    }
}

/* Sleep until a push, a host function's wake-up, or the timeout (0: none). */
static void sleep_until_push(core_t *c, uint64_t tail, uint64_t timeout_ns) {
    uint32_t f = atomic_load(&c->fw);
    atomic_store(&c->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&c->head) == tail && !atomic_load(&c->stop)) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
        futex(&c->fw, FUTEX_WAIT_PRIVATE, f, timeout_ns ? &ts : 0);
    }
    atomic_store(&c->sleeping, 0);
}

static void publish_due(core_t *c) {
    uint64_t due = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        if (l->out > l->seen) {
            uint64_t d = l->t_sig + (uint64_t)l->est;
            if (!due || d < due)
                due = d;
        }
    }
    atomic_store_explicit(&c->due, due, memory_order_relaxed);
}

/* Run a Python fill: open the gate for the Python submit thread and wait for it. */
static void run_python(core_t *c, item_t *it) {
    signal_lanes(c); /* earlier work of every lane is signalled before Python may take long */
    atomic_store(&c->py_at, it->v);
    atomic_fetch_add(&c->pyw, 1);
    futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0);
    while (atomic_load(&c->py_done) != it->v) {
        if (atomic_load(&c->stop) || atomic_load(&c->fault))
            return;
        uint32_t f = atomic_load(&c->fw);
        atomic_store(&c->sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load(&c->py_done) != it->v) {
            struct timespec ts = {0, (long)PY_POLL_NS};
            futex(&c->fw, FUTEX_WAIT_PRIVATE, f, &ts);
        }
        atomic_store(&c->sleeping, 0);
        look(c, now_ns());
    }
    int32_t rc = atomic_load(&c->py_rc);
    if (rc)
        set_fault(c, rc, it->lane, it->v); /* -1: Python reports its own exception */
    else {
        c->lanes[it->lane].pend = it->v;
        c->lanes[it->lane].pend_key = (uint64_t)K_PY << 56;
    }
}

/* Wake the loop ahead of a completion (two-stage wake): its first wake-up after a long
 * idle is the slow one; the one that tells the completion then finds it awake. */
static void prewake(core_t *c) {
    atomic_store(&c->armed, 1);
    if (atomic_exchange(&c->armed, 0)) {
        uint64_t one = 1;
        ssize_t r = write(c->efd, &one, sizeof one);
        (void)r;
        c->t_prewake = now_ns();
        stat_add(c, S_EFD_WRITES);
    }
    stat_add(c, S_PREWAKES);
}

/* How long did the loop take to wake after the last pre-wake? */
static void learn_wake(core_t *c, uint64_t now) {
    if (!c->t_prewake)
        return;
    uint64_t armed_at = atomic_load(&c->t_armed);
    if (armed_at > c->t_prewake) {
        c->wake_est = 0.7 * c->wake_est + 0.3 * (double)(armed_at - c->t_prewake);
        c->t_prewake = 0;
    } else if ((double)(now - c->t_prewake) > c->wake_est) {
        c->wake_est = (double)(now - c->t_prewake); /* not awake yet: at least this long */
    }
    if (c->wake_est > WAKE_EST_MAX_NS)
        c->wake_est = WAKE_EST_MAX_NS;
}

static void *run(void *arg) {
    core_t *c = (core_t *)arg;
    prctl(PR_SET_NAME, "arig-native", 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0); /* timed sleeps end ~1 us late, not ~55 */
    if (!c->nv)
        c->cu.ctx_set_current(c->ctx);
    if (!c->nv && c->cu.exchange_capture_mode) {
        int mode = 2; /* CU_STREAM_CAPTURE_MODE_RELAXED: users' global captures stay valid */
        c->cu.exchange_capture_mode(&mode);
    }
    uint64_t last_progress = now_ns();
    double over = 0; /* how late timed sleeps end */
    while (!atomic_load(&c->stop)) {
        uint64_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&c->head, memory_order_acquire);
        if (t != h) {
            int n = 0;
            for (; t != h && n < BURST; t++, n++) {
                item_t *it = &c->ring[t & (c->cap - 1)];
                if (!atomic_load_explicit(&c->fault, memory_order_relaxed)) {
                    if (it->kind == K_PY) {
                        run_python(c, it);
                    } else {
                        CUresult rc = run_item(c, it);
                        double e = it->kind == K_MARK ? 1 : est_peek(c, item_key(c, it));
                        if (!rc && t + 1 != h && (e == 0 || e > LONG_WORK_NS))
                            /* work known to be long, or of unknown length, with more behind it: its own
                             * completion is progress too (the hang watchdog sees it, and a burst of long
                             * work never looks hung); short work is told at the burst's end, one write for all */
                            rc = c->nv ? nv_signal(c->lanes[it->lane].nq, it->v)
                                 : c->memops ? c->cu.write_value64(c->lanes[it->lane].stream, c->lanes[it->lane].word_dev, it->v, 0)
                                             : host_signal(c, (int)it->lane, it->v);
                        if (rc) {
                            set_fault(c, rc, it->lane, it->v);
                        } else {
                            c->lanes[it->lane].pend = it->v;
                            c->lanes[it->lane].pend_key = item_key(c, it);
                        }
                    }
                }
                stat_add(c, S_ITEMS);
                atomic_store_explicit(&c->tail, t + 1, memory_order_release);
            }
            atomic_thread_fence(memory_order_seq_cst);
            if (atomic_load(&c->space_wanted) && atomic_exchange(&c->space_wanted, 0)) {
                atomic_store(&c->armed, 1);
                kick(c);
            }
            /* Completions first: a lane whose burst is done (the loop may have heard of it from an
             * interrupt or a host function before this thread looked) starts a new prediction now. */
            if (look(c, now_ns()))
                last_progress = now_ns();
            if (!atomic_load(&c->fault))
                signal_lanes(c);
            if (look(c, now_ns()))
                last_progress = now_ns();
            if (!busy(c))
                last_progress = now_ns();
            publish_due(c);
            continue;
        }
        uint64_t now = now_ns();
        if (look(c, now))
            last_progress = now;
        if (atomic_load(&c->fault)) {
            sleep_until_push(c, t, 0); /* lost: only stop is awaited */
            continue;
        }
        if (!busy(c)) {
            atomic_store_explicit(&c->due, 0, memory_order_relaxed);
            last_progress = now;
            /* The loop usually submits again a little after a completion (its task resumes, does its
             * own work, submits): spin that long, so that the push needs no futex wake (a syscall on
             * the loop's side, a wake-up of ~12 us on this one).  Gaps longer than IDLE_MAX_NS sleep. */
            uint64_t end = now + (uint64_t)c->idle_win;
            while (now_ns() < end && atomic_load_explicit(&c->head, memory_order_acquire) == t && !atomic_load(&c->stop))
                cpu_relax();
            if (atomic_load(&c->head) == t) {
                sleep_until_push(c, t, 0);
                double gap = (double)(now_ns() - now);
                if (c->idle_ns && gap < IDLE_MAX_NS / 1.25 && atomic_load(&c->head) != t)
                    c->idle_win = gap * 1.25 > c->idle_win ? gap * 1.25 : c->idle_win; /* just missed: cover it next time */
                else
                    c->idle_win = (double)c->idle_ns; /* a real pause: back to the short spin */
            } else if (c->idle_win > (double)c->idle_ns) {
                double want = (double)(now_ns() - now) * 1.25;
                c->idle_win = 0.9 * c->idle_win + 0.1 * (want > (double)c->idle_ns ? want : (double)c->idle_ns);
            }
            continue;
        }
        publish_due(c);
        if (now - last_progress > FAULT_CHECK_NS) {
            check_faults(c);
            last_progress = now;
            continue;
        }
        /* The lane whose completion is predicted first. */
        lane_t *l = 0;
        for (int i = 0; i < c->nlanes; i++) {
            lane_t *x = &c->lanes[i];
            if (x->out > x->seen && (!l || x->t_sig + x->est < l->t_sig + l->est))
                l = x;
        }
        if (!c->memops) {
            /* Host functions signal every burst; wait for one (or a push). */
            sleep_until_push(c, t, FAULT_CHECK_NS);
            continue;
        }
        if (l->backstop < l->out && l->est > LONG_WORK_NS && l->slept_for != l->out) {
            /* Long work: sleep until shortly before the predicted end (timed, push-interruptible).
             * On the way, wake the loop ahead of the completion by about as long as the loop takes to
             * wake (a vCPU idle for long wakes slowly), so that it is up when the completion comes. */
            /* Signed: an estimate shorter than the leads must not wrap around. */
            int rc = insure(c, (int)(l - c->lanes));
            if (rc) {
                set_fault(c, rc, (uint32_t)(l - c->lanes), l->out);
                continue;
            }
            int64_t due = (int64_t)l->t_sig + (int64_t)l->est, n = (int64_t)now;
            int64_t spin_at = due - c->lead_ns - (int64_t)over;
            int64_t pre_at = due - (int64_t)c->wake_est - (int64_t)PREWAKE_MARGIN_NS - (int64_t)over;
            if (c->prewake && l->prewoke_for != l->out && pre_at + (int64_t)MIN_SLEEP_NS < spin_at && pre_at > (int64_t)l->t_sig) {
                if (pre_at > n + (int64_t)MIN_SLEEP_NS) {
                    sleep_until_push(c, t, (uint64_t)(pre_at - n));
                    if ((int64_t)now_ns() + 1000 < pre_at)
                        continue; /* a push came: look at it first */
                }
                l->prewoke_for = l->out;
                if (lane_done(l) < l->out) {
                    prewake(c);
                } else { /* done already: it took less than this */
                    if (!l->ts || !c->gpu_cal)
                        est_bound(c, l, (double)(now_ns() - l->t_sig), 1);
                    stat_add(c, S_EARLY);
                }
                continue;
            }
            l->slept_for = l->out;
            if (spin_at > n + (int64_t)MIN_SLEEP_NS) {
                sleep_until_push(c, t, (uint64_t)(spin_at - n));
                uint64_t a = now_ns();
                if ((int64_t)a + 1000 >= spin_at) {
                    if ((int64_t)a > spin_at)
                        over = 0.8 * over + 0.2 * (double)((int64_t)a - spin_at);
                    learn_wake(c, a);
                    if (lane_done(l) >= l->out) {
                        /* Done before the window opened: it took less than a - t_sig.  Come down
                         * fast (an estimate too long costs a whole sleep per operation). */
                        if (!l->ts || !c->gpu_cal)
                            est_bound(c, l, (double)(a - l->t_sig), 1);
                        stat_add(c, S_EARLY);
                    } else if (c->prewake && l->prewoke_for != l->out) {
                        l->prewoke_for = l->out;
                        prewake(c);
                    }
                } else {
                    l->slept_for = 0; /* a push came first: sleep again after it */
                }
                continue;
            }
        }
        if (l->backstop >= l->out) {
            /* The spin gave up on this value already: the host function will tell. */
            sleep_until_push(c, t, FAULT_CHECK_NS);
            continue;
        }
        uint64_t target = l->out, end = now + (uint64_t)c->spin_ns;
        if (l->slept_for == l->out && l->est > LONG_WORK_NS) /* woken ahead of the prediction: spin past it */
            end = l->t_sig + (uint64_t)l->est + (uint64_t)c->spin_ns > end ? l->t_sig + (uint64_t)l->est + (uint64_t)c->spin_ns : end;
        uint64_t prev = l->seen;
        while (lane_done(l) == prev && now_ns() < end && atomic_load_explicit(&c->head, memory_order_acquire) == t &&
               !atomic_load(&c->stop))
            cpu_relax();
        uint64_t seen_at = now_ns();
        if (look(c, seen_at)) {
            last_progress = seen_at;
            if (l->seen >= target && l->backstop < target) {
                if (!l->ts || !c->gpu_cal)
                    est_hit(c, l, (double)(seen_at - l->t_sig)); /* seen by this spin: learn (NV: look learned) */
                stat_add(c, S_SPIN_HITS);
            }
            if (l->seen < l->out)
                l->t_sig = seen_at; /* the rest of the burst is predicted from here */
            continue;
        }
        if (atomic_load(&c->head) != t)
            continue;
        /* Missed: the backstop tells the loop once the GPU gets there. */
        for (int i = 0; i < c->nlanes; i++) {
            lane_t *x = &c->lanes[i];
            if (x->out > x->seen && x->backstop < x->out) {
                CUresult rc = x->insured >= x->out ? 0 : host_signal(c, i, x->out); /* NV: asked for already */
                if (rc) {
                    set_fault(c, rc, (uint32_t)i, x->out);
                    break;
                }
                x->backstop = x->out;
                if (c->nv)
                    x->insured = x->out;
            }
        }
        /* Not done when the spin gave up: it takes longer than that (learn only this bound:
         * the backstop's own time comes late by the host function's delay, never learn from it). */
        est_bound(c, l, (double)(now_ns() - l->t_sig), 0);
        stat_add(c, S_SPIN_MISSES);
    }
    look(c, now_ns());
    return 0;
}

/* -- API ------------------------------------------------------------------------------- */

#ifndef ARIG_CORE_SOURCE
#define ARIG_CORE_SOURCE "unknown"
#endif
int arig_core_abi(void) { return ARIG_CORE_ABI; }
/* The sha256 prefix of the core.c this library was built from (set by setup.py). */
const char *arig_core_source(void) { return ARIG_CORE_SOURCE; }
size_t arig_core_sizeof_cuda(void) { return sizeof(arig_cuda); }
size_t arig_core_sizeof_launch(void) { return sizeof(arig_launch); }

/* lanes: streams[i], words[i] (host addresses), word_devs[i] (device addresses); cap: a power of two. */
core_t *arig_core_create(const arig_cuda *cu, void *ctx, int nlanes, void **streams, uint64_t *words, uint64_t *word_devs, int memops,
                         int efd, uint64_t cap, int64_t spin_ns, int64_t idle_ns, int64_t lead_ns, int prewake) {
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
    c->cu = *cu;
    c->ctx = ctx;
    c->cap = cap;
    c->nlanes = nlanes;
    c->memops = memops;
    c->efd = efd;
    c->spin_ns = spin_ns;
    c->idle_ns = idle_ns;
    c->idle_win = (double)idle_ns;
    c->lead_ns = lead_ns;
    c->prewake = prewake;
    c->wake_est = 50000.0;
    atomic_store(&c->armed, 1);
    for (int i = 0; i < nlanes; i++) {
        c->lanes[i].stream = streams[i];
        c->lanes[i].word = (volatile uint64_t *)(uintptr_t)words[i];
        c->lanes[i].word_dev = word_devs[i];
    }
    return c;
}

/* An NV device's core: lanes are its queues; each lane's word is the queue's timeline word. */
core_t *arig_core_create_nv(arig_nvq **qs, int nlanes, int efd, uint64_t cap, int64_t spin_ns, int64_t idle_ns, int64_t lead_ns, int prewake) {
    if (nlanes < 1 || nlanes > MAX_LANES)
        return 0;
    void *streams[MAX_LANES] = {0};
    uint64_t words[MAX_LANES], devs[MAX_LANES] = {0};
    for (int i = 0; i < nlanes; i++)
        words[i] = qs[i]->s.timeline;
    arig_cuda none;
    memset(&none, 0, sizeof none);
    core_t *c = arig_core_create(&none, 0, nlanes, streams, words, devs, 1, efd, cap, spin_ns, idle_ns, lead_ns, prewake);
    if (!c)
        return 0;
    c->nv = 1;
    for (int i = 0; i < nlanes; i++) {
        c->lanes[i].nq = qs[i];
        c->lanes[i].ts = (volatile uint64_t *)(uintptr_t)(qs[i]->s.timeline + 8);
    }
    return c;
}

int arig_core_start(core_t *c) {
    int rc = pthread_create(&c->th, 0, run, c);
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

/* Loop thread: ask for a wake-up once the native thread takes items (then re-check). */
void arig_core_want_space(core_t *c) {
    atomic_store(&c->space_wanted, 1);
    atomic_thread_fence(memory_order_seq_cst);
}

/* Loop thread, in its eventfd reader: re-arm with a full barrier (then read the lanes). */
void arig_core_arm(core_t *c) {
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

/* Loop thread: an NV lane's last release on CLOCK_MONOTONIC (its GPU time and the clocks' offset
 * learned so far), for a value the loop read before the native thread stamped it; 0: unknown. */
uint64_t arig_core_gpu_time(core_t *c, int lane) {
    if (lane < 0 || lane >= c->nlanes || !c->lanes[lane].ts || !c->gpu_cal)
        return 0;
    uint64_t g = *c->lanes[lane].ts, now = now_ns();
    uint64_t s = g + (uint64_t)(*(volatile int64_t *)&c->gpu_off);
    return g && s < now ? s : (g ? now : 0);
}

/* Loop thread, just before it would block (the GIL released by the caller):
 * spin up to ns for lane progress past seen[i]; the eventfd is not written
 * meanwhile.  Returns 1 on progress.  Re-arms before returning without it. */
int arig_core_loop_spin(core_t *c, const uint64_t *seen, int64_t ns) {
    atomic_store(&c->armed, 0);
    uint64_t end = now_ns() + (uint64_t)ns;
    for (;;) {
        for (int i = 0; i < c->nlanes; i++)
            if (lane_done(&c->lanes[i]) > seen[i])
                return 1;
        uint64_t t = now_ns(), due = atomic_load_explicit(&c->due, memory_order_relaxed);
        if (atomic_load(&c->fault) || t > end || due > end)
            break; /* out of time, or the completion is predicted past the window */
        cpu_relax();
    }
    atomic_exchange(&c->armed, 1);
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < c->nlanes; i++)
        if (lane_done(&c->lanes[i]) > seen[i])
            return 1;
    return 0;
}

/* The Python submit thread, before a Python fill of value v: wait (GIL released)
 * until the native thread reaches it.  0: run it; -1: lost or stopping, skip it. */
int arig_core_py_begin(core_t *c, uint64_t v) {
    for (;;) {
        uint32_t f = atomic_load(&c->pyw);
        if (atomic_load(&c->py_at) == v)
            return 0;
        if (atomic_load(&c->stop) || atomic_load(&c->fault) || !c->started)
            return -1;
        futex(&c->pyw, FUTEX_WAIT_PRIVATE, f, 0);
    }
}

void arig_core_py_end(core_t *c, uint64_t v, int32_t rc) {
    atomic_store(&c->py_rc, rc);
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
    for (int i = 0; i < c->nlanes; i++)
        if (c->lanes[i].nq)
            atomic_store(&c->lanes[i].nq->halt, 1);
    atomic_fetch_add(&c->fw, 1);
    futex(&c->fw, FUTEX_WAKE_PRIVATE, 1, 0);
    atomic_fetch_add(&c->pyw, 1);
    futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0);
    if (c->started) {
        pthread_join(c->th, 0);
        c->started = 0;
    }
}

/* Free the core.  Only once no host function can still run (its streams are idle). */
void arig_core_destroy(core_t *c) {
    if (!c)
        return;
    arig_core_stop(c);
    free(c->ring);
    free(c);
}

void arig_core_stats(core_t *c, uint64_t *out, int n) {
    for (int i = 0; i < n && i < S_NSTATS; i++)
        out[i] = atomic_load(&c->stats[i]);
}

