/* The CUDA device's lanes: each lane is a CUstream, driven through a table of libcuda functions that
 * Python fills (struct arig_cuda; its layout is checked against arig.cuda's at load).
 *
 * A burst's value is cuStreamWriteValue64 of the lane's word in mapped host memory.  Where stream memory
 * operations are missing, a host function writes it instead (hword), after the GPU ran the work before
 * it; that host function also tells the loop and wakes the native thread, so the engine need not watch.
 * A fault is what cuStreamQuery of a busy lane reports.
 *
 * The backstop is a host function, or (arig_core_cuda_waiter) a blocking-sync event recorded behind the
 * lane's work, on which a waiter thread of the lane sits in cuEventSynchronize: the driver wakes it
 * from the GPU's interrupt, and it tells as the host function does.  An event holds nothing up: a host
 * function holds its stream until libcuda's callback thread has run it, and the next work waits.
 *
 * Threads: the native thread calls every lane_ops member but stopped (the thread that stops the core);
 * libcuda's callback thread runs hostfn() only (no CUDA call, no lock); a lane's waiter thread
 * ("arig-cuda-wait") calls cuEventSynchronize and tells (waiter_run).
 */
#include "core.h"

#include <string.h>
#include <sys/prctl.h>

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
    CUresult (*event_synchronize)(void *event);
    CUresult (*event_destroy)(void *event);
} arig_cuda;

/* A prepared kernel launch (arig.cuda.Launch keeps one). */
typedef struct arig_launch {
    void *func;
    uint32_t grid[3], block[3], shared, pad;
    void **extra;
} arig_launch;

typedef struct lwaiter lwaiter_t;

/* What the core keeps for a CUDA device.  The stamp kernel (arig_cuda_stamps): a one-thread kernel
 * that writes the GPU's global timer beside the word, {0, t} then {v, t} then the word (each store
 * made visible to the host before the next), so a reader that sees the same v before and after
 * reading t has t of v. */
typedef struct cuda_hw {
    arig_cuda cu;
    void *ctx;
    void *stamp_fn;             /* the stamp kernel's CUfunction (0: none, every signal a memop) */
    uint64_t pairs_dev;         /* lane i's pair at pairs_dev + 16 i (device addresses of the host pairs) */
    volatile uint64_t *cal;     /* the calibration's word and pair (host), at cal_dev on the device */
    uint64_t cal_dev;
    int waiters;                /* backstops are events that a waiter thread per lane waits on */
    lwaiter_t *waiter[MAX_LANES]; /* made at the lane's first backstop (native thread), ended by stopped */
} cuda_hw;

static inline arig_cuda *cu_of(core_t *c) { return &((cuda_hw *)c->hw)->cu; }

typedef struct hrec {
    core_t *c;
    uint32_t lane;
    uint64_t v;
} hrec_t;

size_t arig_core_sizeof_cuda(void) { return sizeof(arig_cuda); }
size_t arig_core_sizeof_launch(void) { return sizeof(arig_launch); }

static CUresult launch_stamp(cuda_hw *hw, void *stream, uint64_t word_dev, uint64_t v, uint64_t pair_dev) {
    void *params[3] = {&word_dev, &v, &pair_dev};
    return hw->cu.launch_kernel(hw->stamp_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, 0);
}

/* The pair's time if it holds v whole (0: it does not: another value, or being written). */
static uint64_t pair_time(const volatile uint64_t *pair, uint64_t v) {
    uint64_t a = pair[0];
    atomic_thread_fence(memory_order_acquire);
    uint64_t t = pair[1];
    atomic_thread_fence(memory_order_acquire);
    return a && a == v && pair[0] == a ? t : 0;
}

#define CAL_SPIN_NS 50000000ull /* a calibration that is not seen in 50 ms (a busy context) is left to spins */

/* Learn the clocks' offset once, before any work: a stamp on lane 0's idle stream, watched by a spin
 * (a look within a fraction of a microsecond of the write).  Later fresh looks keep it. */
static void calibrate(core_t *c, cuda_hw *hw) {
    if (launch_stamp(hw, c->lanes[0].hw, hw->cal_dev, 1, hw->cal_dev + 16))
        return; /* the first work's signal reports what is wrong */
    uint64_t end = now_ns() + CAL_SPIN_NS;
    while (hw->cal[0] != 1 && now_ns() < end && !atomic_load(&c->stop))
        cpu_relax();
    uint64_t seen = now_ns(), g = pair_time(hw->cal + 2, 1);
    if (hw->cal[0] == 1 && g)
        learn_offset(c, seen, g);
}

static void cuda_thread_start(core_t *c) {
    cuda_hw *hw = c->hw;
    hw->cu.ctx_set_current(hw->ctx);
    if (hw->cu.exchange_capture_mode) {
        int mode = 2; /* CU_STREAM_CAPTURE_MODE_RELAXED: users' global captures stay valid */
        hw->cu.exchange_capture_mode(&mode);
    }
    if (hw->stamp_fn)
        calibrate(c, hw);
}

/* Lane i reached v, as a host function or a waiter found (not the native thread): note it, and tell
 * whoever has not seen it yet. */
static void told(core_t *c, int i, uint64_t v) {
    lane_t *l = &c->lanes[i];
    uint64_t h = atomic_load(&l->hword);
    while (h < v && !atomic_compare_exchange_weak(&l->hword, &h, v)) {
    }
    atomic_store(&l->t_ns, now_ns());
    atomic_store(&l->t_v, v); /* a lane's host functions run in order, and its waiter tells in order: v only grows */
    atomic_thread_fence(memory_order_seq_cst);
    if (__atomic_load_n(&l->seen, __ATOMIC_RELAXED) >= v)
        return; /* the native thread saw it first, and told the loop if it had to */
    if (loop_read(c, i) < v)
        kick(c); /* neither the native thread nor the loop saw it yet */
    wake_native(c);
}

/* The host function: runs on libcuda's callback thread after the work before it. */
static void hostfn(void *p) {
    hrec_t *r = (hrec_t *)p;
    core_t *c = r->c;
    uint64_t v = r->v;
    int lane = (int)r->lane;
    free(r);
    told(c, lane, v);
}

/* A lane's waiter: a thread that sits in cuEventSynchronize on the last event the native thread
 * recorded for it, then tells its value.  Two events: the native thread records into the one the
 * waiter is not waiting on (a record into an event being waited on is not defined), so a request
 * made while the waiter waits replaces any request not yet taken (the lane's values grow: the
 * newest covers the older).  A waiter still inside the driver when the core stops (work that hung)
 * is left there, detached: it frees itself once the driver lets it go, and touches the core no more. */
struct lwaiter {
    core_t *c;
    int lane;
    void *ctx;
    CUresult (*set_current)(void *ctx);
    CUresult (*sync)(void *event);
    CUresult (*destroy)(void *event);
    void *ev[2];
    pthread_t th;
    _Atomic uint32_t fw; /* bumped on each request and at stop: the waiter's futex */
    pthread_mutex_t mu;  /* guards what follows; never held across the driver's wait */
    uint64_t want, done; /* the newest value asked for, the last one told */
    int want_ev, busy;   /* the event of want; the one being waited on (-1: none) */
    int stop, detached;
};

static void waiter_free(lwaiter_t *w) {
    for (int e = 0; e < 2; e++)
        if (w->ev[e])
            w->destroy(w->ev[e]);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void *waiter_run(void *p) {
    lwaiter_t *w = p;
    prctl(PR_SET_NAME, "arig-cuda-wait", 0, 0, 0);
    w->set_current(w->ctx);
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        if (w->want <= w->done) {
            uint32_t f = atomic_load(&w->fw);
            pthread_mutex_unlock(&w->mu);
            futex(&w->fw, FUTEX_WAIT_PRIVATE, f, 0);
            pthread_mutex_lock(&w->mu);
            continue;
        }
        uint64_t v = w->want;
        int e = w->want_ev;
        w->busy = e;
        pthread_mutex_unlock(&w->mu);
        CUresult rc = w->sync(w->ev[e]);
        pthread_mutex_lock(&w->mu);
        w->busy = -1;
        if (w->stop)
            break; /* the core may be gone: tell nothing */
        if (rc)
            set_fault(w->c, rc, (uint32_t)w->lane, w->done + 1);
        else
            told(w->c, w->lane, v);
        w->done = v;
    }
    int detached = w->detached;
    pthread_mutex_unlock(&w->mu);
    if (detached)
        waiter_free(w);
    return 0;
}

/* A new waiter of the lane, or 0 with *rc: the driver's error (an event not made: the context's
 * fault, say), or out of memory, or no thread. */
static lwaiter_t *waiter_new(core_t *c, int lane, CUresult *rc) {
    cuda_hw *hw = c->hw;
    lwaiter_t *w = calloc(1, sizeof *w);
    *rc = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    if (!w)
        return 0;
    w->c = c;
    w->lane = lane;
    w->ctx = hw->ctx;
    w->set_current = hw->cu.ctx_set_current;
    w->sync = hw->cu.event_synchronize;
    w->destroy = hw->cu.event_destroy;
    w->busy = -1;
    pthread_mutex_init(&w->mu, 0);
    for (int e = 0; e < 2; e++)
        if ((*rc = hw->cu.event_create(&w->ev[e], 3))) { /* CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING */
            waiter_free(w);
            return 0;
        }
    if (pthread_create(&w->th, 0, waiter_run, w)) {
        *rc = 304; /* CUDA_ERROR_OPERATING_SYSTEM */
        waiter_free(w);
        return 0;
    }
    *rc = 0;
    return w;
}

/* The backstop by the lane's waiter: an event behind the lane's work so far. */
static int event_backstop(core_t *c, lane_t *l, uint64_t v) {
    cuda_hw *hw = c->hw;
    int i = (int)(l - c->lanes);
    lwaiter_t *w = hw->waiter[i];
    CUresult rc = 0;
    if (!w && !(w = hw->waiter[i] = waiter_new(c, i, &rc)))
        return rc;
    pthread_mutex_lock(&w->mu);
    int e = w->busy == 0 ? 1 : 0;
    rc = hw->cu.event_record(w->ev[e], l->hw);
    if (!rc) {
        w->want = v;
        w->want_ev = e;
    }
    pthread_mutex_unlock(&w->mu);
    if (!rc) {
        atomic_fetch_add(&w->fw, 1);
        futex(&w->fw, FUTEX_WAKE_PRIVATE, 1, 0);
        stat_add(c, S_EVENT_WAITS);
    }
    return rc;
}

/* The core stopped (its thread joined): end the waiters.  One inside the driver is left to end
 * by itself (its work may never end); the rest are joined, their events destroyed. */
static void cuda_stopped(core_t *c) {
    cuda_hw *hw = c->hw;
    for (int i = 0; i < c->nlanes; i++) {
        lwaiter_t *w = hw->waiter[i];
        if (!w)
            continue;
        hw->waiter[i] = 0;
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        int inside = w->busy >= 0;
        w->detached = inside;
        pthread_mutex_unlock(&w->mu);
        atomic_fetch_add(&w->fw, 1);
        futex(&w->fw, FUTEX_WAKE_PRIVATE, 1, 0);
        if (inside) {
            pthread_detach(w->th);
        } else {
            pthread_join(w->th, 0);
            waiter_free(w);
        }
    }
}

/* A host function that writes v once the work before it ran. */
static int cuda_backstop(core_t *c, lane_t *l, uint64_t v) {
    if (((cuda_hw *)c->hw)->waiters)
        return event_backstop(c, l, v);
    hrec_t *r = malloc(sizeof *r);
    if (!r)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    r->c = c;
    r->lane = (uint32_t)(l - c->lanes);
    r->v = v;
    CUresult rc = cu_of(c)->launch_host_func(l->hw, hostfn, r);
    if (rc)
        free(r);
    else
        stat_add(c, S_HOSTFNS);
    return rc;
}

static int cuda_write_signal(core_t *c, lane_t *l, uint64_t v) { return cu_of(c)->write_value64(l->hw, l->hw_addr, v, 0); }

static int cuda_stamp_signal(core_t *c, lane_t *l, uint64_t v) {
    cuda_hw *hw = c->hw;
    return launch_stamp(hw, l->hw, l->hw_addr, v, hw->pairs_dev + 16 * (uint64_t)(l - c->lanes));
}

static uint64_t cuda_stamp(const lane_t *l) { return l->stamp_pair ? pair_time(l->stamp_pair, *l->word) : 0; }

static CUresult cuda_join(arig_cuda *cu, lane_t *l, const item_t *it) {
    void **slot = (void **)(uintptr_t)it->b;
    CUresult rc = 0;
    if (it->c) {
        if (!*slot)
            rc = cu->event_create(slot, 2); /* CU_EVENT_DISABLE_TIMING */
        if (!rc)
            rc = cu->event_record(*slot, (void *)(uintptr_t)it->a);
    }
    return rc ? rc : cu->stream_wait_event(l->hw, *slot, 0);
}

static int cuda_run_item(core_t *c, lane_t *l, const item_t *it) {
    arig_cuda *cu = cu_of(c);
    switch (it->kind) {
    case K_CFILL:
        return ((fill_fn)(uintptr_t)it->a)(l->hw, (void *)(uintptr_t)it->b, it->v);
    case K_LAUNCH: {
        arig_launch *k = (arig_launch *)(uintptr_t)it->a;
        return cu->launch_kernel(k->func, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shared, l->hw, 0,
                                 k->extra);
    }
    case K_GRAPH:
        return cu->graph_launch((void *)(uintptr_t)it->a, l->hw);
    case K_H2D:
        return cu->memcpy_htod(it->a, (const void *)(uintptr_t)it->b, (size_t)it->c, l->hw);
    case K_D2H:
        return cu->memcpy_dtoh((void *)(uintptr_t)it->a, it->b, (size_t)it->c, l->hw);
    case K_MARK:
        return 0;
    case K_JOIN:
        return cuda_join(cu, l, it);
    default:
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
}

static uint64_t cuda_launch_key(uint64_t record) {
    const arig_launch *l = (const arig_launch *)(uintptr_t)record;
    return (uint64_t)(uintptr_t)l->func ^ ((uint64_t)l->grid[0] << 20) ^ ((uint64_t)l->grid[1] << 40) ^ ((uint64_t)l->grid[2] << 52) ^ l->block[0];
}

static int cuda_check_fault(core_t *c, lane_t *l) {
    CUresult rc = cu_of(c)->stream_query(l->hw);
    return rc == 600 ? 0 : rc; /* CUDA_ERROR_NOT_READY: busy, not broken */
}

static void cuda_destroy(core_t *c) { free(c->hw); }

/* With stream memory operations: the GPU writes each value, and the engine watches the words. */
static const lane_ops CUDA_LANES = {
    .thread_start = cuda_thread_start,
    .run_item = cuda_run_item,
    .launch_key = cuda_launch_key,
    .signal = cuda_write_signal,
    .backstop = cuda_backstop,
    .check_fault = cuda_check_fault,
    .stopped = cuda_stopped,
    .destroy = cuda_destroy,
    /* The host function before a sleep on long work: the loop hears of the end even where the
     * prediction is late, and its time teaches the estimate (no GPU time here). */
    .early_backstop = 1,
};

/* With memory operations and the stamp kernel: long work's signals carry the GPU's time. */
static const lane_ops CUDA_STAMPED_LANES = {
    .thread_start = cuda_thread_start,
    .run_item = cuda_run_item,
    .launch_key = cuda_launch_key,
    .signal = cuda_write_signal,
    .signal_stamped = cuda_stamp_signal,
    .backstop = cuda_backstop,
    .check_fault = cuda_check_fault,
    .stamp = cuda_stamp,
    .stopped = cuda_stopped,
    .destroy = cuda_destroy,
    .early_backstop = 1,
};

/* Without them: a host function signals every burst, and tells the loop itself. */
static const lane_ops CUDA_HOSTFN_LANES = {
    .thread_start = cuda_thread_start,
    .run_item = cuda_run_item,
    .launch_key = cuda_launch_key,
    .signal = cuda_backstop,
    .backstop = cuda_backstop,
    .check_fault = cuda_check_fault,
    .destroy = cuda_destroy,
    .signal_tells = 1,
};

/* lanes: streams[i], words[i] (host addresses), word_devs[i] (device addresses); cap: a power of two. */
core_t *arig_core_create(const arig_cuda *cu, void *ctx, int nlanes, void **streams, uint64_t *words, uint64_t *word_devs, int memops,
                         int efd, uint64_t cap, int64_t spin_ns, int64_t idle_ns, int64_t lead_ns, int prewake) {
    cuda_hw *hw = calloc(1, sizeof *hw);
    if (!hw)
        return 0;
    core_t *c = core_new(memops ? &CUDA_LANES : &CUDA_HOSTFN_LANES, nlanes, words, efd, cap, spin_ns, idle_ns, lead_ns, prewake);
    if (!c) {
        free(hw);
        return 0;
    }
    hw->cu = *cu;
    hw->ctx = ctx;
    c->hw = hw;
    for (int i = 0; i < nlanes; i++) {
        c->lanes[i].hw = streams[i];
        c->lanes[i].hw_addr = word_devs[i];
    }
    return c;
}

/* Before arig_core_start, on a core with memory operations: signal long work with the stamp kernel
 * fn(word, v, pair) (a CUfunction of the context).  pairs: 16 bytes per lane (host and device
 * addresses of mapped memory), cal: 24 more (the calibration's word and pair).  0, or 1 where the
 * core has no memory operations or has started. */
int arig_core_cuda_stamps(core_t *c, void *fn, uint64_t pairs, uint64_t pairs_dev, uint64_t cal, uint64_t cal_dev) {
    if (c->ops != &CUDA_LANES || c->started || !fn)
        return 1;
    cuda_hw *hw = c->hw;
    hw->stamp_fn = fn;
    hw->pairs_dev = pairs_dev;
    hw->cal = (volatile uint64_t *)(uintptr_t)cal;
    hw->cal_dev = cal_dev;
    for (int i = 0; i < c->nlanes; i++)
        c->lanes[i].stamp_pair = (volatile uint64_t *)(uintptr_t)(pairs + 16 * (uint64_t)i);
    c->ops = &CUDA_STAMPED_LANES;
    return 0;
}

/* Before arig_core_start, on a core with memory operations: backstops are blocking-sync events that
 * a waiter thread per lane waits on, not host functions.  0, or 1 where the core has no memory
 * operations (every signal a host function) or has started. */
int arig_core_cuda_waiter(core_t *c) {
    if ((c->ops != &CUDA_LANES && c->ops != &CUDA_STAMPED_LANES) || c->started)
        return 1;
    ((cuda_hw *)c->hw)->waiters = 1;
    return 0;
}
