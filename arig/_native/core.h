/* The engine's types, shared by the engine (core.c, core_api.c) and the lane operations of each
 * device kind (lanes_cuda.c, lanes_nv.c).
 *
 * The engine owns the ring, the lanes' completion state, the estimator and every decision of when
 * to signal, watch, sleep, spin, pre-wake and give up; a device kind says only how one lane does a
 * thing on its hardware, through its struct lane_ops.  The engine never names a hardware call: a
 * third device kind is a new lane_ops table and a constructor, with no change here.
 */
#ifndef ARIG_CORE_H
#define ARIG_CORE_H

#define _GNU_SOURCE /* futex, prctl, syscall: this header comes first in every file */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Functions the library's files share; not part of the C ABI that Python binds (arig_*). */
#define ARIG_INTERNAL __attribute__((visibility("hidden")))

#define MAX_LANES 64
#define WAKE_BUCKETS 3 /* the loop's wake-up figures, by how long it slept (struct core) */
#define LOOP_LEAD_MAX_NS 100000 /* the loop's lead to its spin (struct core), at most */
#define LONG_WORK_NS 50000.0 /* predicted longer than this: sleep before spinning, signal each item */

/* K_MARK: no work (the value marks the lane's earlier work).  K_JOIN: the lane waits for
 * another stream's work: a = that stream, b = the address of its event slot (made here on first
 * use), c = 1 to record the event on a first, 0 when the slot holds an event recorded elsewhere. */
enum { K_CFILL = 1, K_LAUNCH = 2, K_GRAPH = 3, K_H2D = 4, K_D2H = 5, K_PY = 6, K_MARK = 7, K_JOIN = 8 };

typedef struct item {
    uint32_t kind, lane;
    uint64_t v, a, b, c;
} item_t;

/* A compiled fill: queue is the lane's hardware queue (a CUstream, an arig_nvq). */
typedef int (*fill_fn)(void *queue, void *arg, uint64_t v);

typedef struct lane {
    void *hw;                /* the lane's hardware queue: a CUstream, or an arig_nvq */
    uint64_t hw_addr;        /* the lane_ops' own: CUDA the word's device address, NV the GPU time's host address */
    volatile uint64_t *word; /* written by the GPU */
    _Atomic uint64_t hword;  /* written by host functions */
    _Atomic uint64_t t_ns;   /* CLOCK_MONOTONIC when progress was last seen */
    _Atomic uint64_t t_v;    /* the value t_ns is the time of (written after t_ns) */
    /* the native thread's own */
    uint64_t pend, out, seen, backstop, t_sig, slept_for, prewoke_for, prewoke2_for, t_look;
    uint64_t insured;       /* the value a backstop was asked for before a sleep (early_backstop kinds) */
    uint64_t key, pend_key; /* what the in-flight burst (and the next) ends with: the estimate's key */
    uint64_t stamped;       /* the last value signalled with the GPU's time of it */
    uint64_t signalled;     /* the last value signalled at all (a burst's end skips it once more) */
    uint64_t learned;       /* the last burst end whose length was learned from the GPU's time */
    uint64_t turned;        /* the burst end whose missed spin turned to a longer mode (core.c's give_up) */
    uint64_t close;         /* the burst end of work never seen before whose spin missed: watched closely (core.c's close_watch) */
    /* Where the kind writes {value, GPU time} beside the word for a stamped signal (0: nowhere);
     * value 0 while the pair is being written. */
    volatile uint64_t *stamp_pair;
    double est;             /* predicted ns from t_sig to the burst's completion */
} lane_t;

/* Predicted durations, by what a burst ends with (a launch record, a graph, a C fill):
 * one lane runs work of very different lengths.  lo/hi: bounds learned from misses and
 * early finds since the last hit (0: unknown).
 *
 * One kernel and grid may take a few lengths by its arguments (a step of a model, by its batch):
 * the lengths it was seen to take (modes) are kept with a weight that grows each time it takes
 * one and fades as it takes others.  A mode of weight MODE_LIVE or more is live: the watch aims
 * at the shortest live mode first and, when its spin there misses, at the next one
 * (estimate.c's est_next), where one prediction would miss every length but the last one's. */
#define EST_SLOTS 256
#define EST_MODES 6
typedef struct est {
    uint64_t key, hits, taught; /* taught: by any find (a hit, a host function, a bound) since claimed */
    double est, lo, hi;
    double top;                 /* the longest live mode, or est where it is longer: is this work long? */
    double mode[EST_MODES], weight[EST_MODES];
    int nmodes;
} est_t;

enum { S_EFD_WRITES, S_HOSTFNS, S_FUTEX_WAKES, S_SPIN_HITS, S_SPIN_MISSES, S_EARLY, S_ITEMS, S_PREWAKES, S_QUERIES, S_PREWAKES_AGAIN, S_PY_GATES, S_EVENT_WAITS, S_MODE_TURNS, S_CLOSE_WATCHES, S_NUDGES, S_NSTATS };

typedef struct core core_t;

/* What one lane does on its device's hardware.  Every member runs on the core's native thread
 * unless said otherwise; each returns 0 or the device kind's error code (the core's fault word).
 * A NULL member: the kind has no such thing. */
typedef struct lane_ops {
    /* The native thread's first act (CUDA: make the context current). */
    void (*thread_start)(core_t *c);
    /* Run one item (any kind but K_PY, which the engine runs itself). */
    int (*run_item)(core_t *c, lane_t *l, const item_t *it);
    /* What predicts a launch record's duration (kernel, grid, block; not its arguments). */
    uint64_t (*launch_key)(uint64_t record);
    /* Have the lane's word become v after the lane's work so far. */
    int (*signal)(core_t *c, lane_t *l, uint64_t v);
    /* The same, with the GPU's time of it written where stamp reads it (costlier than signal: the
     * engine asks for it where the work is known to be long, to learn its length exactly); NULL where
     * the kind has none, or where every signal is stamped (signal_stamps). */
    int (*signal_stamped)(core_t *c, lane_t *l, uint64_t v);
    /* Have the loop told once the lane's word holds v, without the native thread watching:
     * a host function, or an interrupt that wakes the loop's driver event fd. */
    int (*backstop)(core_t *c, lane_t *l, uint64_t v);
    /* The lane's error, 0 while it is healthy (busy or idle). */
    int (*check_fault)(core_t *c, lane_t *l);
    /* The GPU's raw time of the lane's word's current value (0: not known: not written yet, or
     * written by an unstamped signal); NULL where the hardware writes none.  Also called on the loop
     * thread (arig_core_gpu_time): a memory read only. */
    uint64_t (*stamp)(const lane_t *l);
    /* End the lane's waits for ring room (a fault, a stop); any thread. */
    void (*halt)(lane_t *l);
    /* The core's thread was joined: end the kind's own threads (on the thread that stops the core;
     * called on each stop, once or more). */
    void (*stopped)(core_t *c);
    /* Free what the constructor allocated for the kind (the core is stopped). */
    void (*destroy)(core_t *c);
    /* signal itself wakes the native thread and tells the loop (a host function): no watching. */
    int signal_tells;
    /* Every signal carries the GPU's time (an NV semaphore release with its timestamp). */
    int signal_stamps;
    /* Ask for the backstop before a sleep on long work, not only when a spin gives up: the loop then
     * learns of the completion even if the prediction is late (cheap where it is one pushbuffer entry). */
    int early_backstop;
} lane_ops;

struct core {
    _Atomic uint64_t head;
    char pad0[56];
    _Atomic uint64_t tail;
    char pad1[56];
    _Atomic uint32_t armed, sleeping, fw, stop, space_wanted, pyw;
    _Atomic int32_t fault;
    _Atomic uint32_t fault_lane;
    _Atomic uint64_t fault_v;
    _Atomic uint64_t py_at, py_done; /* the last Python fill's value that may run, and that ended */
    _Atomic uint64_t py_failed;      /* the value of the Python fill that failed (0: none), its code in py_rc */
    _Atomic int32_t py_rc;
    _Atomic uint64_t due; /* CLOCK_MONOTONIC of the soonest predicted completion, 0: none */
    uint64_t cap;
    item_t *ring;
    int efd, nlanes, prewake, started;
    const lane_ops *ops;
    void *hw;        /* the device kind's own (CUDA: its libcuda table and context) */
    int64_t gpu_off; /* CLOCK_MONOTONIC minus the GPU's timer, at most (learned from looks; stamp kinds) */
    int gpu_cal;
    int64_t spin_ns, idle_ns, lead_ns;
    /* Long work's watch (arig_core_tune): no early backstop (the lane kind's is skipped), and the
     * first stage of a long sleep cut into naps of at most poll_ns (0: one sleep), each ending in a look. */
    int no_early_backstop;
    int64_t poll_ns;
    /* Python fills predicted at most this long share gates (arig_core_py_short; core.c's run_pythons). */
    _Atomic int64_t py_short_ns;
    /* The loop's spin window (arig_core_loop_window): woken further than this ahead of a predicted
     * end, the loop sleeps again; the core then wakes it once more (0: never). */
    int64_t loop_ahead_ns;
    /* How long the loop takes from its wake-up (its arm) to its spin in the window, as the loop
     * measures it (arig_core_loop_lead): its first steps after a long sleep run on cold caches.
     * Pre-wakes come this much earlier, so that the spin is under way when the end comes. */
    _Atomic int64_t loop_lead_ns;
    /* The loop's view of each lane (its Core.seen, written by the loop as it delivers; 0: unknown):
     * progress the loop read already needs no eventfd write. */
    const volatile uint64_t *loop_seen;
    /* What the loop's last spin in its window saw of each lane (arig_core_loop_spin, before it
     * returns to deliver it): the loop is about to read that progress, and needs no wake for it. */
    _Atomic uint64_t loop_saw[MAX_LANES];
    double idle_win; /* this idle spin's length: idle_ns, or longer where the next push usually comes a bit later */
    _Atomic uint64_t t_armed;    /* when the loop first re-armed after the last pre-wake (its clock) */
    _Atomic uint64_t prewoke_at; /* when the last pre-wake was written (the loop reads it to arm) */
    uint64_t t_prewake;          /* the same, native thread's copy (0: no pre-wake still to learn from) */
    /* How long the loop takes to wake up after a pre-wake, learned from pre-wakes, by how long
     * it had slept (WAKE_BUCKETS of them, core.c's wake_bucket): a vCPU idle for milliseconds
     * wakes several times slower than one idle for a hundred microseconds. */
    double wake_est[WAKE_BUCKETS], wake_dev[WAKE_BUCKETS]; /* mean and mean deviation */
    /* A figure to start a bucket from (arig_core_wake_seed; 0: none), taken by the native thread. */
    _Atomic int64_t wake_seed[WAKE_BUCKETS];
    int wake_bucket; /* the bucket of the pre-wake in t_prewake */
    uint64_t last_burst_end;  /* the native thread's: when the last burst signalled its lanes */
    uint64_t last_progress;   /* the native thread's: when a lane last progressed (or all went idle) */
    double over;              /* the native thread's: how late its timed sleeps end */
    uint64_t nudged;          /* the native thread's: when it last nudged the loop (core.c's close_watch) */
    pthread_t th;
    _Atomic uint64_t stats[S_NSTATS];
    est_t ests[EST_SLOTS];
    lane_t lanes[MAX_LANES];
};

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline long futex(_Atomic uint32_t *a, int op, uint32_t v, const struct timespec *ts) {
    return syscall(SYS_futex, a, op, v, ts, 0, 0);
}

static inline void stat_add(core_t *c, int k) { atomic_fetch_add_explicit(&c->stats[k], 1, memory_order_relaxed); }

static inline uint64_t lane_done(lane_t *l) {
    uint64_t w = l->word ? *l->word : 0, h = atomic_load_explicit(&l->hword, memory_order_acquire);
    return w > h ? w : h;
}

/* The last value of lane i that the loop has read or is about to deliver (its view, or what its
 * last spin saw); 0 where the core does not know the loop's view. */
static inline uint64_t loop_read(core_t *c, int i) {
    if (!c->loop_seen)
        return 0;
    uint64_t s = c->loop_seen[i], w = atomic_load(&c->loop_saw[i]);
    return w > s ? w : s;
}

/* A new core over ops: lane i's word at words[i] (host addresses); cap a power of two.  The
 * caller fills each lane's hw and hw_addr, and c->hw.  0 on a bad argument or no memory. */
ARIG_INTERNAL core_t *core_new(const lane_ops *ops, int nlanes, const uint64_t *words, int efd, uint64_t cap, int64_t spin_ns,
                               int64_t idle_ns, int64_t lead_ns, int prewake);
/* Wake the loop if it is armed: at most one eventfd write per loop wake-up (any thread). */
ARIG_INTERNAL void kick(core_t *c);
/* Wake the native thread if it announced that it sleeps (any thread). */
ARIG_INTERNAL void wake_native(core_t *c);
/* Publish the first fault, end every wait, and tell the loop (any thread). */
ARIG_INTERNAL void set_fault(core_t *c, int32_t code, uint32_t lane, uint64_t v);
/* End every lane's waits for ring room (any thread). */
ARIG_INTERNAL void halt_lanes(core_t *c);
/* Lane l's burst in flight ends with a stamped signal and the clocks' offset is known: its length
 * is learned exactly from the GPU's own time of it, however it is found; other bursts are learned
 * from what the native thread sees. */
static inline int gpu_learns(const core_t *c, const lane_t *l) { return c->ops->stamp && c->gpu_cal && l->stamped >= l->out; }

/* The estimator (estimate.c).  The estimate slot of key, claimed for it. */
ARIG_INTERNAL est_t *est_of(core_t *c, uint64_t key);
/* What an item's duration is predicted by. */
ARIG_INTERNAL uint64_t item_key(const core_t *c, const item_t *it);
/* How long work of key may take, without claiming its slot (0: unknown): its longest live
 * mode, or its prediction where that is longer (what decides whether work is long). */
ARIG_INTERNAL double est_peek(core_t *c, uint64_t key);
/* Lane l's spin missed its burst `ran` ns after its signal: the next live mode longer than that
 * (0: none; the backstop then tells). */
ARIG_INTERNAL double est_next(core_t *c, const lane_t *l, double ran);
/* Has lane l's burst's work never been seen to end (no length learned for its key)? */
ARIG_INTERNAL int est_unseen(core_t *c, const lane_t *l);
/* Is work of key known to take at most most ns? */
ARIG_INTERNAL int est_short(core_t *c, uint64_t key, double most);
/* Lane l's burst was seen done d ns after its signal (exact: from the GPU's own time). */
ARIG_INTERNAL void est_hit(core_t *c, lane_t *l, double d, int exact);
/* How much sooner than its host function the GPU reaches a value, about (the host function's delay). */
#define HOSTFN_LEAD_NS 15000.0
/* Lane l's burst was told done by its backstop's host function d ns after its signal. */
ARIG_INTERNAL void est_told(core_t *c, lane_t *l, double d);
/* Lane l's burst was found done `most` ns after its signal, with neither the GPU's time of it nor a
 * host function's: it took at most that long. */
ARIG_INTERNAL void est_most(core_t *c, lane_t *l, double most);
/* Lane l's burst was found done (done) or not yet (!done) bound ns after its signal. */
ARIG_INTERNAL void est_bound(core_t *c, lane_t *l, double bound, int done);
/* When lane l's word was written, on CLOCK_MONOTONIC (the GPU's time where it has one, else now);
 * fresh: a spin saw it change just now (the clocks' offset is learned from those only); *exact
 * says which of the two it is. */
ARIG_INTERNAL uint64_t stamp_of(core_t *c, lane_t *l, uint64_t now, int fresh, int *exact);
/* Learn the clocks' offset from one fresh look: at now, the GPU's raw time was g, about. */
ARIG_INTERNAL void learn_offset(core_t *c, uint64_t now, uint64_t g);
/* The native thread's body (pthread_create's start routine). */
ARIG_INTERNAL void *core_run(void *arg);

#endif
