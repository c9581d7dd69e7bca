/* arig's native core: a device's submit and completion thread, without Python (the engine).
 *
 * Plain C ABI, no Python.h: arig loads it with ctypes.  One core per device.  This file is the
 * core's own thread; core_api.c holds the calls of the other threads; the hardware is reached only
 * through the core's lane_ops (core.h): lanes_cuda.c for libcuda streams, lanes_nv.c for NV channels.
 *
 * Who calls what:
 *   - the event-loop thread: arig_core_push, arig_core_arm, arig_core_hold, arig_core_want_space,
 *     arig_core_addr, arig_core_fault, arig_core_due, arig_core_gpu_time, arig_core_loop_spin
 *     (all non-blocking but the last, which spins for a bounded time);
 *   - the Python submit thread (Python fills, open and close):
 *     arig_core_create(_nv), arig_core_start, arig_core_py_begin (blocks),
 *     arig_core_py_end, arig_core_stop (joins), arig_core_destroy;
 *   - the core's own thread ("arig-native"): everything in core_run(); it is the
 *     only thread that launches, copies or signals on the device's lanes;
 *   - libcuda's callback thread: lanes_cuda.c's host function only (no CUDA call, no lock).
 *
 * Submission: the loop pushes fixed-size items into a single-producer
 * single-consumer ring and wakes the native thread with a futex only if it
 * announced that it sleeps (io_uring SQPOLL's need-wakeup flag).
 *
 * Completion: after each burst the native thread has each lane signal the
 * burst's last value into the lane's word in mapped host memory (lane_ops.signal);
 * inside a burst of work known to be long, after each item too, so that its
 * progress shows.  Only the GPU and host functions ever write a completion: no
 * wake-up, kick, timeout or poll is taken for one.  While work is in flight the
 * native thread watches the words: a timed sleep (1 us timer slack) until shortly
 * before the predicted completion, then a bounded spin; when the spin gives up
 * the lane's backstop is asked for (a host function, an interrupt), which tells
 * the loop once the GPU gets there.  Progress is told to the loop by writing its
 * eventfd, only while the loop is armed (libuv's uv_async_send coalescing); the
 * loop re-arms with a full barrier and reads the words again, so no completion
 * is lost between the two.
 *
 * Faults: after FAULT_CHECK_NS without progress the native thread asks each busy
 * lane for its error (lane_ops.check_fault), and publishes the first.
 */
#include "core.h"

#include <sys/prctl.h>

#define BURST 32
#define FAULT_CHECK_NS 20000000ull /* 20 ms without progress: ask the driver */
#define PY_POLL_NS 50000ull        /* while a Python fill runs, look at the words this often */
#define PY_SPIN_NS 20000ull        /* ... after spinning this long for it to end */
#define MIN_SLEEP_NS 15000ull
#define PREWAKE_MARGIN_NS 20000ull /* pre-wake the loop this much earlier than it takes to wake */
#define WAKE_EST_MAX_NS 500000.0
#define IDLE_MAX_NS 150000.0 /* the idle spin grows to cover the loop's usual gap up to this, never more */

/* Work never seen before has no end to pre-wake the loop for: when its spin misses, its end is
 * found by the next look, and the loop, asleep since the submit, wakes slowly (a vCPU idle for a
 * millisecond or more: 150-350 us on a VM, where one kept busy wakes in ~10-50).  So such work is
 * watched closely for its first CLOSE_MAX_NS: a look every CLOSE_NAP_NS, and a nudge of the loop
 * every CLOSE_WAKE_NS (a wake-up that finds nothing to deliver and sleeps again), which keeps its
 * CPU from going idle for long.  CPU: a 10 ms first wait cost 1.6-1.8 ms of all threads' CPU on an
 * H100's VM (0.6 ms without), once per kernel and grid (its length is learned from it). */
#define CLOSE_NAP_NS 50000ull
#define CLOSE_WAKE_NS 150000ull
#define CLOSE_MAX_NS 20000000ull

/* Wake the loop if it is armed: at most one eventfd write per loop wake-up. */
void kick(core_t *c) {
    if (atomic_exchange(&c->armed, 0)) {
        uint64_t one = 1;
        ssize_t r = write(c->efd, &one, sizeof one);
        (void)r; /* EAGAIN: the counter is saturated, the loop is awake anyway */
        stat_add(c, S_EFD_WRITES);
    }
}

void wake_native(core_t *c) {
    if (atomic_load(&c->sleeping)) {
        atomic_store(&c->sleeping, 0);
        atomic_fetch_add(&c->fw, 1);
        futex(&c->fw, FUTEX_WAKE_PRIVATE, 1, 0);
        stat_add(c, S_FUTEX_WAKES);
    }
}

void halt_lanes(core_t *c) {
    if (c->ops->halt)
        for (int i = 0; i < c->nlanes; i++)
            c->ops->halt(&c->lanes[i]);
}

void set_fault(core_t *c, int32_t code, uint32_t lane, uint64_t v) {
    int32_t zero = 0;
    halt_lanes(c); /* a wait for ring room ends */
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

/* Have lane l signal v after its work so far; est: the predicted length of the work it ends.  Work
 * known to be long is signalled with the GPU's time of it where the kind can (a few microseconds
 * more, against a length learned exactly: a spin then opens where the work ends); short or unknown
 * work with the cheap signal. */
static int lane_signal(core_t *c, lane_t *l, uint64_t v, double est) {
    int stamped = c->ops->signal_stamps;
    int rc;
    if (!stamped && c->ops->signal_stamped && est > LONG_WORK_NS) {
        rc = c->ops->signal_stamped(c, l, v);
        stamped = 1;
    } else {
        rc = c->ops->signal(c, l, v);
    }
    if (!rc) {
        l->signalled = v;
        if (stamped)
            l->stamped = v;
    }
    return rc;
}

/* End of a burst: have each lane signal its last value. */
static void signal_lanes(core_t *c) {
    uint64_t t = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        if (l->pend <= l->out)
            continue;
        int rc = l->signalled == l->pend ? 0 : lane_signal(c, l, l->pend, est_peek(c, l->pend_key));
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

/* Has the loop yet to read some lane's progress?  Not where its own spin in the window saw the
 * word first (it delivers next, or did): an eventfd write then would only wake it for nothing
 * (and, with the next work already in flight, far ahead of that work's end). */
static int loop_behind(core_t *c) {
    for (int i = 0; i < c->nlanes; i++)
        if (c->lanes[i].seen > loop_read(c, i))
            return 1;
    return 0;
}

/* Look at every lane's completion; tell the loop of progress.  Returns 1 on progress.  fresh: the
 * lane a spin saw progress on while it watched (-1: none). */
static int look_fresh(core_t *c, uint64_t now, int fresh) {
    int progressed = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *l = &c->lanes[i];
        uint64_t d = lane_done(l);
        if (d > l->seen) {
            uint64_t t = atomic_load(&l->t_ns);
            int told = 1, exact = 0;
            uint64_t g = stamp_of(c, l, now, i == fresh, &exact); /* now where the GPU's time is unknown */
            if (exact || t <= l->t_look || atomic_load(&l->t_v) < d) {
                /* the GPU's own time of this progress, or none and no host function stamped it: seen now */
                atomic_store(&l->t_ns, t = g);
                atomic_store(&l->t_v, d);
                told = 0;
            }
            l->t_look = t;
            int burst_done = d >= l->out && l->out > l->seen && t > l->t_sig;
            if (burst_done && exact) {
                /* The burst in flight is done, and the GPU's time says when: learn its length
                 * exactly, however it was found (a spin, a timed wake, a push after the loop heard
                 * of it from a backstop). */
                est_hit(c, l, (double)(t - l->t_sig), 1);
                l->learned = l->out;
            } else if (burst_done && told && l->insured >= l->out)
                /* Its backstop's host function told it first (the spin missed, or the thread slept
                 * past it): that time is a little after the work's end, whichever way the prediction
                 * was wrong. */
                est_told(c, l, (double)(t - l->t_sig));
            else if (burst_done && !told && l->close == l->out && l->learned < l->out)
                /* Work never seen before, found by a look of its close watch: it ended within the
                 * nap before this look.  Learned as the nap's middle, at once (as a GPU time is:
                 * the first length known); the next wait's spin then opens about there, and its
                 * own sight of the end refines it. */
                est_hit(c, l, (double)(now - l->t_sig) - (double)CLOSE_NAP_NS / 2, 1);
            else if (burst_done && !told && l->learned < l->out)
                /* no better time of the end than this look's (read after the word): at most this long */
                est_most(c, l, (double)(now_ns() - l->t_sig));
            l->seen = d;
            progressed = 1;
        }
    }
    if (progressed && loop_behind(c))
        kick(c);
    return progressed;
}

static int look(core_t *c, uint64_t now) { return look_fresh(c, now, -1); }

/* look(), remembering progress for the fault check. */
static void look_now(core_t *c) {
    uint64_t t = now_ns();
    if (look(c, t))
        c->last_progress = t;
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
        int rc = c->ops->check_fault(c, l);
        stat_add(c, S_QUERIES);
        if (rc) {
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
            /* under a close watch no end is predicted: none inside the loop's window (it would spin) */
            uint64_t d = l->close == l->out ? now_ns() + (uint64_t)c->loop_ahead_ns + CLOSE_WAKE_NS : l->t_sig + (uint64_t)l->est;
            if (!due || d < due)
                due = d;
        }
    }
    atomic_store_explicit(&c->due, due, memory_order_relaxed);
}

/* The Python fills of the run at ring index t (k items, *took of them handed to their lanes
 * already) that ended, up to value done: each lane's pending value moves past them, for the next
 * signal. */
static void took_pythons(core_t *c, uint64_t t, int k, int *took, uint64_t done) {
    for (; *took < k; (*took)++) {
        item_t *it = &c->ring[(t + (uint64_t)*took) & (c->cap - 1)];
        if (it->v > done)
            break;
        c->lanes[it->lane].pend = it->v;
        c->lanes[it->lane].pend_key = (uint64_t)K_PY << 56;
    }
}

/* How many items from ring index t on (head h, at most most) run behind one gate, after k of them
 * already counted (of the last value *last): the first always; then the Python fills next in the
 * ring, in value order, while Python fills are known to be short work (a value is then signalled
 * behind the work the next fill enqueued meanwhile, a short delay) and none waits on the GPU for
 * something of its own (a = 1: a gated fill, whose lane must be signalled up to the value before
 * it first, or the work that opens its gate may wait on that value). */
static int more_pythons(core_t *c, uint64_t t, uint64_t h, int k, int most, uint64_t *last) {
    int64_t most_ns = atomic_load_explicit(&c->py_short_ns, memory_order_relaxed);
    int batch = !c->ring[t & (c->cap - 1)].a && (most_ns < 0 || est_short(c, (uint64_t)K_PY << 56, (double)most_ns));
    for (; k < most && t + (uint64_t)k != h; k++) {
        item_t *it = &c->ring[(t + (uint64_t)k) & (c->cap - 1)];
        if (k > 0 && (!batch || it->kind != K_PY || it->v <= *last || it->a))
            break;
        *last = it->v;
    }
    return k;
}

/* Run the Python fills from ring index t on (head h; at most most of them): open the gate for the
 * Python submit thread and wait for it.  The gate opens for every Python fill next in the ring at
 * once (py_at: the last value that may run), and wider as more land while they run: the submit
 * thread then runs fill after fill on one hold of the GIL, where one gate per fill made it wait
 * for this thread between any two (and, with the loop busy, for the GIL again).  Each fill's value
 * is signalled as it ends; the last one's at the burst's end, as any item's.  Returns how many
 * items it took (at least one: the item at t is a Python fill). */
static int run_pythons(core_t *c, uint64_t t, uint64_t h, int most) {
    signal_lanes(c); /* earlier work of every lane is signalled before Python may take long */
    uint64_t last = 0, told = atomic_load(&c->py_done); /* the fills before this run ended */
    int k = more_pythons(c, t, h, 0, most, &last), took = 0;
    stat_add(c, S_PY_GATES);
    atomic_store(&c->py_at, last);
    atomic_fetch_add(&c->pyw, 1);
    futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0);
    /* A fill usually takes a few microseconds: spin that long before sleeping (a futex wake of
     * this thread from py_end costs more than the fill). */
    uint64_t end = now_ns() + PY_SPIN_NS;
    for (;;) {
        uint64_t done = atomic_load(&c->py_done);
        if (atomic_load(&c->py_failed) || (done == last && k >= most))
            break;
        if (done > told && done != last) {
            /* Each fill's value is signalled as soon as it ended, behind at most the work the
             * next fill enqueued meanwhile (one signal at the run's end made the first value of a
             * 32-fill run wait for all 32: 64 tasks then completed 0.7x as often). */
            told = done;
            took_pythons(c, t, k, &took, done);
            signal_lanes(c);
            end = now_ns() + PY_SPIN_NS; /* the run goes on: spin for the next */
        }
        if (atomic_load(&c->stop) || atomic_load(&c->fault))
            return k;
        int k2 = more_pythons(c, t, atomic_load_explicit(&c->head, memory_order_acquire), k, most, &last);
        if (k2 > k) { /* more landed: open the gate for them too */
            k = k2;
            atomic_store(&c->py_at, last);
            atomic_fetch_add(&c->pyw, 1);
            futex(&c->pyw, FUTEX_WAKE_PRIVATE, 1 << 30, 0);
            continue;
        }
        if (done == last)
            break;
        if (now_ns() < end) {
            cpu_relax();
            continue;
        }
        uint32_t f = atomic_load(&c->fw);
        atomic_store(&c->sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load(&c->py_done) != last && !atomic_load(&c->py_failed)) {
            struct timespec ts = {0, (long)PY_POLL_NS};
            futex(&c->fw, FUTEX_WAIT_PRIVATE, f, &ts);
        }
        atomic_store(&c->sleeping, 0);
        look(c, now_ns());
    }
    uint64_t failed = atomic_load(&c->py_failed);
    if (!failed) {
        took_pythons(c, t, k, &took, atomic_load(&c->py_done));
        return k;
    }
    /* -1: Python reports its own exception.  The fills before it ended, and their values are
     * signalled as if each had had a gate of its own; it and the rest did not run. */
    took_pythons(c, t, k, &took, failed - 1);
    signal_lanes(c);
    set_fault(c, atomic_load(&c->py_rc), took < k ? c->ring[(t + (uint64_t)took) & (c->cap - 1)].lane : 0, failed);
    return k;
}

/* The loop's sleep before a pre-wake: WAKE_BUCKETS_NS[i] and longer is bucket i + 1. */
static const uint64_t WAKE_BUCKETS_NS[WAKE_BUCKETS - 1] = {500000ull, 3000000ull};

static int wake_bucket(uint64_t slept) {
    return slept < WAKE_BUCKETS_NS[0] ? 0 : slept < WAKE_BUCKETS_NS[1] ? 1 : 2;
}

/* How long the loop takes to wake after sleeping about `slept` ns, at most (usually): its mean
 * and twice its mean deviation (a pre-wake a little early costs a short spin of the loop; one
 * late costs the whole difference). */
static double wake_est(core_t *c, uint64_t slept) {
    int b = wake_bucket(slept);
    return c->wake_est[b] + 2 * c->wake_dev[b];
}

/* Wake the loop whether or not it is armed (it re-arms as it wakes), counted as `why`. */
static void wake_loop(core_t *c, int why) {
    atomic_store(&c->armed, 0);
    uint64_t one = 1;
    ssize_t r = write(c->efd, &one, sizeof one);
    (void)r;
    stat_add(c, S_EFD_WRITES);
    stat_add(c, why);
}

/* Wake the loop ahead of a completion (two-stage wake): its first wake-up after a long
 * idle is the slow one; the one that tells the completion then finds it awake.  `slept`: how
 * long the loop has slept (about: since the work was signalled). */
static void prewake(core_t *c, uint64_t slept) {
    uint64_t now = now_ns();
    c->t_prewake = now;
    c->wake_bucket = wake_bucket(slept);
    atomic_store(&c->prewoke_at, now); /* before the write: the loop's arm compares with it */
    wake_loop(c, S_PREWAKES);
}

/* How long did the loop take to wake after the last pre-wake?  Asked on every turn of the
 * native thread while a pre-wake is unlearned: the loop's first arm after it is its wake-up;
 * not armed yet, it takes at least this long. */
static void learn_wake(core_t *c, uint64_t now) {
    for (int b = 0; b < WAKE_BUCKETS; b++) {
        /* A plain load first: this runs on every turn, and a seed is rare (an exchange would write
         * the line each time). */
        if (atomic_load_explicit(&c->wake_seed[b], memory_order_relaxed) <= 0)
            continue;
        int64_t seed = atomic_exchange(&c->wake_seed[b], 0);
        if (seed > 0) {
            c->wake_est[b] = (double)seed; /* above WAKE_EST_MAX_NS too: the first learning caps it */
            c->wake_dev[b] = 0;
        }
    }
    if (!c->t_prewake)
        return;
    uint64_t armed_at = atomic_load(&c->t_armed);
    double *w = &c->wake_est[c->wake_bucket], *d = &c->wake_dev[c->wake_bucket];
    if (armed_at >= c->t_prewake) {
        double x = (double)(armed_at - c->t_prewake);
        *d = 0.7 * *d + 0.3 * (x > *w ? x - *w : *w - x);
        *w = 0.7 * *w + 0.3 * x;
        c->t_prewake = 0;
    } else if ((double)(now - c->t_prewake) > *w) {
        *w = (double)(now - c->t_prewake); /* not awake yet: at least this long */
    }
    if (*w > WAKE_EST_MAX_NS) {
        *w = WAKE_EST_MAX_NS;
        c->t_prewake = 0; /* the loop was busy, not asleep: nothing more to learn from this one */
    }
}


/* -- the native thread ----------------------------------------------------------------- */

/* Run one item of a burst. */
static void run_one(core_t *c, item_t *it) {
    lane_t *l = &c->lanes[it->lane];
    int rc = c->ops->run_item(c, l, it);
    uint64_t key = item_key(c, it);
    double e = it->kind == K_MARK ? 1 : est_peek(c, key);
    if (!rc && (e == 0 || e > LONG_WORK_NS))
        /* work known to be long, or of unknown length: its own completion is progress too (the
         * hang watchdog sees it, and a burst of long work never looks hung); short work is told
         * at the burst's end, one write for all */
        rc = lane_signal(c, l, it->v, e);
    if (rc) {
        set_fault(c, rc, it->lane, it->v);
    } else {
        l->pend = it->v;
        l->pend_key = key;
    }
}

/* While pushes stream in (the last burst ended less than STREAMING_NS ago), a burst is held open
 * for up to GATHER_NS after its last item for the next push: many tasks submitting one item each
 * then share one signal and one completion write, where taking each push alone as it lands would
 * signal (and wake the loop for) every item apart.  A lone submit, after a pause, never waits. */
#define GATHER_NS 3000
#define STREAMING_NS 20000

/* Take up to BURST items from tail t (head h), run them, and signal every lane's last value. */
static void run_burst(core_t *c, uint64_t t, uint64_t h) {
    int n = 0;
    int streaming = c->last_burst_end && now_ns() - c->last_burst_end < STREAMING_NS;
    for (;;) {
        /* long or unknown work is signalled as it is run (a gather may add items behind it);
         * signal_lanes does not signal it twice */
        while (t != h && n < BURST) {
            item_t *it = &c->ring[t & (c->cap - 1)];
            int k = 1;
            if (atomic_load_explicit(&c->fault, memory_order_relaxed)) {
                /* lost: the item is skipped */
            } else if (it->kind == K_PY) {
                k = run_pythons(c, t, h, BURST - n);
                h = atomic_load_explicit(&c->head, memory_order_acquire); /* the run may have taken items that landed after h */
            } else {
                run_one(c, it);
            }
            atomic_fetch_add_explicit(&c->stats[S_ITEMS], (uint64_t)k, memory_order_relaxed);
            t += (uint64_t)k;
            n += k;
            atomic_store_explicit(&c->tail, t, memory_order_release);
        }
        if (!streaming || n >= BURST || atomic_load(&c->fault))
            break;
        uint64_t end = now_ns() + GATHER_NS;
        while (atomic_load_explicit(&c->head, memory_order_acquire) == h && now_ns() < end && !atomic_load(&c->stop))
            cpu_relax();
        uint64_t h2 = atomic_load_explicit(&c->head, memory_order_acquire);
        if (h2 == h)
            break;
        h = h2;
    }
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&c->space_wanted) && atomic_exchange(&c->space_wanted, 0)) {
        atomic_store(&c->armed, 1);
        kick(c);
    }
    /* Completions first: a lane whose burst is done (the loop may have heard of it from a
     * backstop before this thread looked) starts a new prediction now. */
    look_now(c);
    if (!atomic_load(&c->fault))
        signal_lanes(c);
    look_now(c);
    c->last_burst_end = now_ns();
    if (!busy(c))
        c->last_progress = c->last_burst_end;
    publish_due(c);
}

/* Nothing in flight: spin for the next push a while, then sleep until it comes. */
static void idle(core_t *c, uint64_t t, uint64_t now) {
    atomic_store_explicit(&c->due, 0, memory_order_relaxed);
    c->last_progress = now;
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
}

/* The busy lane whose completion is predicted first. */
static lane_t *first_due(core_t *c) {
    lane_t *l = 0;
    for (int i = 0; i < c->nlanes; i++) {
        lane_t *x = &c->lanes[i];
        if (x->out > x->seen && (!l || x->t_sig + x->est < l->t_sig + l->est))
            l = x;
    }
    return l;
}

/* Found done on waking at a: it took less than a - t_sig. */
static void found_early(core_t *c, lane_t *l, uint64_t a) {
    if (!gpu_learns(c, l)) /* else the look learns its length exactly */
        est_bound(c, l, (double)(a - l->t_sig), 1);
    stat_add(c, S_EARLY);
}

/* A timed sleep longer than twice this ends LAST_SLEEP_NS early, and the rest is slept again: a sleep
 * of milliseconds ends late by a varying amount (the vCPU sat idle), a short one from a CPU just
 * awake ends a few microseconds late. */
#define LAST_SLEEP_NS 300000

/* Where long work is watched in naps (poll_ns: CUDA, whose backstop is a host function that
 * libcuda's callback thread, idle through the work, runs late), a lane whose spin gave up is
 * looked at after a nap of MISS_NAP_NS, or a 32nd of how long its work has run so far where that is
 * longer (CPU: about 32 naps for each e-fold of the work's length past 3 ms). */
#define MISS_NAP_NS 100000ull
static uint64_t miss_nap(const lane_t *l, uint64_t now) {
    uint64_t ran = now > l->t_sig ? now - l->t_sig : 0, nap = ran / 32;
    return nap < MISS_NAP_NS ? MISS_NAP_NS : nap > FAULT_CHECK_NS ? FAULT_CHECK_NS : nap;
}

/* A first-stage sleep of ns on lane l's work, cut into naps (each ends in a look at the words: work
 * that ended far earlier than predicted is found within a nap, without a backstop) of the core's
 * poll period or a tenth of the predicted length, whichever is longer (CPU: ten naps a work at most);
 * after a missed spin, while it turns to the next length, no longer than the naps after a miss. */
static uint64_t nap(core_t *c, const lane_t *l, uint64_t ns) {
    if (!c->poll_ns)
        return ns;
    uint64_t p = (uint64_t)c->poll_ns, tenth = (uint64_t)(l->est / 10);
    if (tenth > p)
        p = tenth;
    if (l->turned == l->out) { /* a spin missed already: on to the next length in the naps after a miss */
        uint64_t m = miss_nap(l, now_ns());
        if (m < p)
            p = m;
    }
    return ns > p ? p : ns;
}

/* Sleep until the pre-wake time (a push ends it early), then pre-wake the loop, asleep since
 * `since`; `done_for` (the lane's prewoke_for or prewoke2_for) records that it was done for l->out. */
static void sleep_to_prewake(core_t *c, lane_t *l, uint64_t t, int64_t n, int64_t pre_at, uint64_t *done_for, uint64_t since) {
    if (pre_at - n > 2 * (int64_t)LAST_SLEEP_NS) {
        sleep_until_push(c, t, nap(c, l, (uint64_t)(pre_at - n - LAST_SLEEP_NS)));
        return; /* the watch comes back here for the rest: the pre-wake is still to do */
    }
    if (pre_at > n + (int64_t)MIN_SLEEP_NS) {
        sleep_until_push(c, t, (uint64_t)(pre_at - n));
        if ((int64_t)now_ns() + 1000 < pre_at)
            return; /* a push came: look at it first */
    }
    *done_for = l->out;
    if (lane_done(l) < l->out) {
        if (done_for == &l->prewoke2_for)
            stat_add(c, S_PREWAKES_AGAIN);
        prewake(c, now_ns() - since);
    } else { /* done already: it took less than this */
        found_early(c, l, now_ns());
    }
}

/* When should the loop be woken once more for work due at `due`, asked at n (0: not at all; -1:
 * not known yet: the loop has not re-armed since the first pre-wake, and the window is not open
 * yet)?  Where it woke from the first pre-wake further ahead than its spin window opens, it slept
 * again (a loop's wake-up after milliseconds asleep varies by hundreds of microseconds, and the
 * first pre-wake comes by the slow end of it).  The second comes by its wake-up after that
 * shorter sleep, but at most AGAIN_INSIDE_NS less than the window ahead of the end: a loop that
 * wakes at once then still finds the window open, and one that wakes slowly is late by less than
 * the completion's own eventfd write would make it. */
#define AGAIN_INSIDE_NS 10000
/* Until the loop re-arms after the first pre-wake, the native thread looks for it this often. */
#define AGAIN_LOOK_NS 40000
static int64_t prewake_again_at(core_t *c, int64_t due, int64_t n) {
    uint64_t pw = atomic_load(&c->prewoke_at), armed = atomic_load(&c->t_armed);
    if (armed < pw) /* not awake yet: whether it wakes too early is still to see, until the window opens */
        return due - n > c->loop_ahead_ns ? -1 : 0;
    if (due - (int64_t)armed <= c->loop_ahead_ns)
        return 0; /* awake inside the window: it spins */
    double ahead = wake_est(c, (uint64_t)(due - (int64_t)armed)) + (double)PREWAKE_MARGIN_NS + (double)atomic_load_explicit(&c->loop_lead_ns, memory_order_relaxed),
           most = c->loop_ahead_ns > AGAIN_INSIDE_NS ? (double)(c->loop_ahead_ns - AGAIN_INSIDE_NS) : 0;
    return due - (int64_t)(ahead < most ? ahead : most) - (int64_t)c->over;
}

/* Sleep until the spin window opens (a push ends it early), learning how late sleeps end. */
static void sleep_to_spin(core_t *c, lane_t *l, uint64_t t, int64_t n, int64_t spin_at) {
    sleep_until_push(c, t, (uint64_t)(spin_at - n));
    uint64_t a = now_ns();
    if ((int64_t)a + 1000 < spin_at) {
        l->slept_for = 0; /* a push came first: sleep again after it */
        return;
    }
    if ((int64_t)a > spin_at)
        c->over = 0.8 * c->over + 0.2 * (double)((int64_t)a - spin_at);
    learn_wake(c, a);
    if (lane_done(l) >= l->out) {
        /* Done before the window opened.  Come down fast (an estimate too long costs a whole
         * sleep per operation). */
        found_early(c, l, a);
    } else if (c->prewake && l->prewoke_for != l->out) {
        l->prewoke_for = l->out;
        prewake(c, a - l->t_sig);
    }
}

/* Long work: sleep until shortly before the predicted end (timed, push-interruptible).  On the
 * way, wake the loop ahead of the completion by about as long as the loop takes to wake (a vCPU
 * idle for long wakes slowly), so that it is up when the completion comes.  Returns 0 where the
 * spin should start now, 1 where the thread slept (or faulted) and should look again. */
static int sleep_long(core_t *c, lane_t *l, uint64_t t, uint64_t now) {
    /* Asked even where the length is learned exactly: a kernel of one key (one grid) may run far
     * shorter than the last one did, and only the backstop then tells of it before the long sleep
     * ends (without it, 12 % of a mixed tail on CUDA waited ~5 ms). */
    if (c->ops->early_backstop && !c->no_early_backstop && l->insured < l->out) {
        l->insured = l->out;
        int rc = c->ops->backstop(c, l, l->out);
        if (rc) {
            set_fault(c, rc, (uint32_t)(l - c->lanes), l->out);
            return 1;
        }
    }
    /* Signed: an estimate shorter than the leads must not wrap around. */
    int64_t due = (int64_t)l->t_sig + (int64_t)l->est, n = (int64_t)now;
    int64_t spin_at = due - c->lead_ns - (int64_t)c->over;
    int64_t lead = atomic_load_explicit(&c->loop_lead_ns, memory_order_relaxed);
    int64_t pre_at = due - (int64_t)wake_est(c, (uint64_t)(due - (int64_t)l->t_sig)) - (int64_t)PREWAKE_MARGIN_NS - lead - (int64_t)c->over;
    if (c->prewake && l->prewoke_for != l->out && pre_at + (int64_t)MIN_SLEEP_NS < spin_at && pre_at > (int64_t)l->t_sig) {
        sleep_to_prewake(c, l, t, n, pre_at, &l->prewoke_for, l->t_sig);
        return 1;
    }
    if (c->prewake && c->loop_ahead_ns && l->prewoke_for == l->out && l->prewoke2_for != l->out && n < spin_at) {
        int64_t again_at = prewake_again_at(c, due, n);
        if (again_at > 0) { /* before the spin; past its time already (this thread napped through it): now */
            int64_t at = again_at < spin_at - (int64_t)MIN_SLEEP_NS ? again_at : spin_at - (int64_t)MIN_SLEEP_NS;
            sleep_to_prewake(c, l, t, n, at > n ? at : n, &l->prewoke2_for, atomic_load(&c->t_armed));
            return 1;
        }
        if (again_at < 0) {
            int64_t look = spin_at - n < AGAIN_LOOK_NS ? spin_at - n : AGAIN_LOOK_NS;
            if (look > (int64_t)MIN_SLEEP_NS) {
                sleep_until_push(c, t, (uint64_t)look);
                return 1;
            }
        }
    }
    if (spin_at - n > 2 * (int64_t)LAST_SLEEP_NS) {
        sleep_until_push(c, t, nap(c, l, (uint64_t)(spin_at - n - LAST_SLEEP_NS)));
        return 1; /* the rest is slept from a CPU that is awake */
    }
    l->slept_for = l->out;
    if (spin_at > n + (int64_t)MIN_SLEEP_NS) {
        sleep_to_spin(c, l, t, n, spin_at);
        return 1;
    }
    return 0;
}

/* The spin missed: each busy lane's backstop tells the loop once the GPU gets there.  Where the
 * work turns to a longer length it takes and naps watch the words on the way (poll_ns: CUDA), no
 * backstop is asked for yet: a host function holds the stream until libcuda's callback thread has
 * run it, which made the next work start late (by up to ~400 us at 10 ms); the last turn's miss
 * asks for it. */
static void give_up(core_t *c, lane_t *l) {
    double ran = (double)(now_ns() - l->t_sig), next = est_next(c, l, ran);
    /* Never seen before: watched closely a while (close_watch), whose looks find it; where naps look
     * (poll_ns: CUDA) no backstop is asked for meanwhile (a host function would hold the stream). */
    int close = next == 0 && c->prewake && ran < (double)CLOSE_MAX_NS && est_unseen(c, l);
    for (int i = 0; i < c->nlanes && !((next > 0 || close) && c->poll_ns); i++) {
        lane_t *x = &c->lanes[i];
        if (x->out > x->seen && x->backstop < x->out) {
            int rc = x->insured >= x->out ? 0 : c->ops->backstop(c, x, x->out); /* asked for already before a sleep */
            if (rc) {
                set_fault(c, rc, (uint32_t)i, x->out);
                break;
            }
            x->backstop = x->insured = x->out;
        }
    }
    stat_add(c, S_SPIN_MISSES);
    if (next > 0) {
        /* Work of a few lengths, and not this one: watch for the next it was seen to take, as for
         * any prediction (a sleep, the loop's pre-wakes, a spin), with the backstop asked for
         * already in case it is none of them (or naps that look). */
        l->est = next;
        l->turned = l->out;
        l->slept_for = l->prewoke_for = l->prewoke2_for = 0;
        stat_add(c, S_MODE_TURNS);
        return;
    }
    l->turned = 0;
    /* Not done when the spin gave up: it takes longer than that (learn only this bound:
     * the backstop's own time comes late by the host function's delay, never learn from it). */
    est_bound(c, l, ran, 0);
    if (close) {
        l->close = l->out;
        stat_add(c, S_CLOSE_WATCHES);
    }
}

/* Work never seen before whose spin missed (give_up): look every CLOSE_NAP_NS and nudge the loop
 * every CLOSE_WAKE_NS, for its first CLOSE_MAX_NS; past that, the usual watch (its next spin
 * misses, and the backstop is asked for).  The core's turn after each nap looks at the words. */
static int close_watch(core_t *c, lane_t *l, uint64_t t, uint64_t now) {
    if (now - l->t_sig >= CLOSE_MAX_NS) {
        l->close = 0;
        return 0;
    }
    if (now - c->nudged >= CLOSE_WAKE_NS) {
        c->nudged = now;
        wake_loop(c, S_NUDGES); /* not a pre-wake: nothing is learned from its wake-up */
    }
    sleep_until_push(c, t, CLOSE_NAP_NS);
    return 1;
}

/* Spin on lane l's word for a bounded time (a push ends it); give up to the backstop on a miss. */
static void spin(core_t *c, lane_t *l, uint64_t t, uint64_t now) {
    uint64_t target = l->out, end = now + (uint64_t)c->spin_ns;
    if (l->slept_for == l->out && l->est > LONG_WORK_NS) /* woken ahead of the prediction: spin past it */
        end = l->t_sig + (uint64_t)l->est + (uint64_t)c->spin_ns > end ? l->t_sig + (uint64_t)l->est + (uint64_t)c->spin_ns : end;
    uint64_t prev = l->seen, turns = 0;
    while (lane_done(l) == prev && now_ns() < end && atomic_load_explicit(&c->head, memory_order_acquire) == t &&
           !atomic_load(&c->stop)) {
        cpu_relax();
        turns++;
    }
    uint64_t seen_at = now_ns();
    /* Fresh only where the word changed while this spin watched it, not before it began. */
    if (look_fresh(c, seen_at, turns && lane_done(l) != prev ? (int)(l - c->lanes) : -1)) {
        c->last_progress = seen_at;
        if (l->seen >= target && (l->backstop < target || l->turned == target)) {
            if (l->learned < target) /* seen by this spin: learn (unless the look learned it from the GPU's time) */
                est_hit(c, l, (double)(seen_at - l->t_sig), 0);
            stat_add(c, S_SPIN_HITS);
        }
        if (l->seen < l->out)
            l->t_sig = seen_at; /* the rest of the burst is predicted from here */
        return;
    }
    if (atomic_load(&c->head) == t)
        give_up(c, l);
}

/* Work in flight, no item waiting at tail t: look for faults, sleep or spin until it completes. */
static void watch(core_t *c, uint64_t t, uint64_t now) {
    publish_due(c);
    if (now - c->last_progress > FAULT_CHECK_NS) {
        check_faults(c);
        c->last_progress = now;
        return;
    }
    lane_t *l = first_due(c);
    if (c->ops->signal_tells) {
        /* Every burst's signal wakes this thread; wait for one (or a push). */
        sleep_until_push(c, t, FAULT_CHECK_NS);
        return;
    }
    if (l->close == l->out && close_watch(c, l, t, now))
        return;
    /* turning: the spin missed, and the watch goes on to the next length this work was seen to take */
    int turning = l->turned == l->out;
    if ((l->backstop < l->out || turning) && l->est > LONG_WORK_NS && l->slept_for != l->out && sleep_long(c, l, t, now))
        return;
    if (l->backstop >= l->out && !turning) {
        /* The spin gave up on this value already (work never seen before, or far longer than
         * predicted): the backstop will tell. */
        sleep_until_push(c, t, c->poll_ns ? miss_nap(l, now) : FAULT_CHECK_NS);
        return;
    }
    spin(c, l, t, now);
}

void *core_run(void *arg) {
    core_t *c = (core_t *)arg;
    prctl(PR_SET_NAME, "arig-native", 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0); /* timed sleeps end ~1 us late, not ~55 */
    if (c->ops->thread_start)
        c->ops->thread_start(c);
    c->last_progress = now_ns();
    c->over = 0;
    while (!atomic_load(&c->stop)) {
        uint64_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&c->head, memory_order_acquire);
        if (t != h) {
            run_burst(c, t, h);
            continue;
        }
        uint64_t now = now_ns();
        learn_wake(c, now);
        if (look(c, now))
            c->last_progress = now;
        if (atomic_load(&c->fault))
            sleep_until_push(c, t, 0); /* lost: only stop is awaited */
        else if (!busy(c))
            idle(c, t, now);
        else
            watch(c, t, now);
    }
    look(c, now_ns());
    return 0;
}
