/* The core's predictions, on its native thread only: how long a burst takes (by what it ends with),
 * and when a lane's word was written (the GPU's own time where its lanes write one). */
#include "core.h"

/* The slot key's estimate lives in (another key's, where it was claimed since). */
static est_t *slot_of(core_t *c, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return &c->ests[(h >> 32) % EST_SLOTS];
}

est_t *est_of(core_t *c, uint64_t key) {
    est_t *e = slot_of(c, key);
    if (e->key != key) {
        e->key = key;
        e->hits = e->taught = 0;
        e->est = e->lo = e->hi = e->top = 0;
        e->nmodes = 0;
    }
    return e;
}

/* A mode is live while its weight is MODE_LIVE or more: a weight fades by MODE_FADE on every
 * length learned and grows by one when the length is its own, up to MODE_MOST.  A length seen once
 * is live for the next wait only; one taken by 5 % of the work or more stays live nearly always (a
 * simulation of the bench's tail mix: 94-100 % of the waits that needed it), and one the work
 * stopped taking fades out within about 28 waits.  A higher threshold visits fewer lengths (CPU)
 * but misses rarer ones (at 1.5, the mix's 13 % length was live for only 82 % of its waits, and
 * each miss waits for the backstop). */
#define MODE_LIVE 1.0
#define MODE_FADE 0.95
#define MODE_MOST 4.0

/* The shortest live mode (-1: none). */
static double first_live(const est_t *e) {
    double f = -1;
    for (int i = 0; i < e->nmodes; i++)
        if (e->weight[i] >= MODE_LIVE && (f < 0 || e->mode[i] < f))
            f = e->mode[i];
    return f;
}

/* top: the longest live mode, or est where that is longer. */
static void set_top(est_t *e) {
    double t = e->est;
    for (int i = 0; i < e->nmodes; i++)
        if (e->weight[i] >= MODE_LIVE && e->mode[i] > t)
            t = e->mode[i];
    e->top = t;
}

/* Work of e took d ns: the mode within a tolerance of it (half a spin, or 1/32 of d where that
 * is more: one length of real work jitters by more than a spin, and lengths closer than that are
 * watched as one) follows it and grows; else d is a new mode, in a free place or the weakest one's. */
static void mode_learn(core_t *c, est_t *e, double d) {
    double tol = (double)c->spin_ns / 2, rel = d / 32;
    if (rel > tol)
        tol = rel;
    int near = -1, weak = -1;
    double near_off = 0;
    for (int i = 0; i < e->nmodes; i++) {
        e->weight[i] *= MODE_FADE;
        double off = e->mode[i] > d ? e->mode[i] - d : d - e->mode[i];
        if (off <= tol && (near < 0 || off < near_off)) {
            near = i;
            near_off = off;
        }
        if (weak < 0 || e->weight[i] < e->weight[weak])
            weak = i;
    }
    if (near >= 0) {
        e->mode[near] = 0.8 * e->mode[near] + 0.2 * d;
        e->weight[near] = e->weight[near] + 1 > MODE_MOST ? MODE_MOST : e->weight[near] + 1;
        return;
    }
    int i = e->nmodes < EST_MODES ? e->nmodes++ : weak;
    e->mode[i] = d;
    e->weight[i] = 1;
}

/* After a length was learned: aim first at the shortest live mode where it is shorter than the
 * one prediction (work of a few lengths is then met at each in turn, est_next). */
static void aim_first(est_t *e) {
    double f = first_live(e);
    if (f >= 0 && f < e->est)
        e->est = f;
    set_top(e);
}

double est_next(core_t *c, const lane_t *l, double ran) {
    const est_t *e = slot_of(c, l->key);
    if (e->key != l->key)
        return 0;
    double n = 0;
    for (int i = 0; i < e->nmodes; i++)
        if (e->weight[i] >= MODE_LIVE && e->mode[i] > ran && (n == 0 || e->mode[i] < n))
            n = e->mode[i];
    return n;
}

/* What an item's duration is predicted by: a kernel with its grid (whatever its arguments),
 * a graph, a C fill, a copy's kind and size. */
uint64_t item_key(const core_t *c, const item_t *it) {
    uint64_t k = it->a;
    if (it->kind == K_LAUNCH)
        k = c->ops->launch_key(it->a);
    else if (it->kind == K_H2D || it->kind == K_D2H)
        k = it->c;
    return k ^ ((uint64_t)it->kind << 56);
}

int est_unseen(core_t *c, const lane_t *l) {
    const est_t *e = slot_of(c, l->key);
    return e->key != l->key || !e->nmodes; /* every length learned (a hit, a host function's) is a mode */
}

/* How long work of key may take, without claiming its slot (0: unknown). */
double est_peek(core_t *c, uint64_t key) {
    const est_t *e = slot_of(c, key);
    return e->key == key ? e->top : 0;
}

/* Is work of key known (taught by some find since its slot was claimed) to take at most most ns?
 * An estimate of 0 so taught is short work, not unknown work. */
int est_short(core_t *c, uint64_t key, double most) {
    const est_t *e = slot_of(c, key);
    return e->key == key && e->taught && e->top <= most;
}

/* Seen by a spin after d ns (or learned from the GPU's own time): the estimate is good; follow it.
 * A length that moved by more than half a spin jumps there at once where the GPU's time says so
 * (exact, so one wait teaches it; a kernel whose arguments made it 5x longer took ~15 waits to
 * follow by averaging, each of them a miss); seen by a spin, it is averaged (the spin's own
 * timing jitters by a few microseconds). */
void est_hit(core_t *c, lane_t *l, double d, int exact) {
    est_t *e = est_of(c, l->key);
    double half = (double)c->spin_ns / 2;
    int jump = e->est == 0 || (exact && (d > e->est + half || d < e->est - half));
    e->est = jump ? d : 0.8 * e->est + 0.2 * d;
    e->lo = e->hi = 0;
    e->hits++;
    e->taught++;
    mode_learn(c, e, d);
    aim_first(e);
    l->est = e->est;
}

/* Told by a host function d ns after its signal (the backstop, asked before a sleep or when a spin
 * gave up): the work ended a little before (a host function runs some microseconds after the GPU
 * reaches it).  A prediction that far off moves there at once instead of creeping by a spin's
 * length per wait (a kernel whose arguments made it 5x longer took ~100 waits to be found);
 * one within a spin's length is kept (spins see the end more exactly than host functions do). */
void est_told(core_t *c, lane_t *l, double d) {
    est_t *e = est_of(c, l->key);
    e->taught++;
    double cand = d - HOSTFN_LEAD_NS;
    if (cand < 0)
        cand = 0;
    if (e->est == 0 || cand > e->est + (double)c->spin_ns || cand < e->est - (double)c->spin_ns) {
        e->est = cand;
        e->lo = e->hi = 0;
    }
    mode_learn(c, e, cand);
    aim_first(e);
    l->est = e->est;
}

/* Found done on waking at t_sig + bound: it took less.  Not done when a spin gave up at
 * t_sig + bound: it takes more.  Until a spin has seen this work complete, bisect between
 * such bounds (or step by half again); after that, nudge (its length jitters a little). */
void est_bound(core_t *c, lane_t *l, double bound, int done) {
    est_t *e = est_of(c, l->key);
    e->taught++;
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
        set_top(e);
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
    set_top(e);
    l->est = e->est;
}

/* Found done at t_sig + most by a look that knows no better time of the end (no GPU time, no host
 * function's): the work took at most that long.  A prediction longer than that is wrong, and is cut
 * to it at once.  Without this, a lane whose completions reach the loop by its backstop while this
 * thread sleeps toward a prediction far too long (the work got shorter: one kernel and grid, other
 * arguments) is woken by the next push each time, finds the work done, and never learns: the
 * prediction stays long for ever.  Until a spin has seen the work end, the bound also narrows the
 * bisection.  A prediction within the bound is kept: the look may come long after the end. */
void est_most(core_t *c, lane_t *l, double most) {
    est_t *e = est_of(c, l->key);
    if (e->est > most || (!e->hits && e->lo > 0 && (e->hi == 0 || most < e->hi)))
        est_bound(c, l, most, 1);
}

/* When the lane's word was written, on CLOCK_MONOTONIC: the GPU's time of it where the hardware
 * writes one (and the clocks' offset is known), else now.  The offset is learned only from fresh
 * looks (fresh: a spin saw the word change while it watched, within a fraction of a microsecond of
 * the release), as the least (now - GPU time) seen, let rise so that a drift between the clocks is
 * followed.  Never from other looks: a look that comes late would make the GPU's times
 * read late, the learned lengths long, the sleeps long and the next looks late again, a state that
 * keeps itself (seen on the H200: every 1 ms kernel found 3 ms late). */
void learn_offset(core_t *c, uint64_t now, uint64_t g) {
    int64_t cand = (int64_t)(now - g);
    if (!c->gpu_cal || cand < c->gpu_off) {
        c->gpu_off = cand;
        c->gpu_cal = 1;
    } else {
        /* A fresh look is trustworthy (it comes within a microsecond of the release), so follow
         * it up quickly: the GPU's timer may drift from the host's (a fit of stamps into mapped
         * memory on the H200 found 0.05-0.5 ppm; a coarser probe once read tens of ppm, 320 us in
         * the 10 s of one benchmark row), which a slow rise would turn into lengths learned short. */
        c->gpu_off += (cand - c->gpu_off) >> 3;
    }
}

uint64_t stamp_of(core_t *c, lane_t *l, uint64_t now, int fresh, int *exact) {
    uint64_t g = c->ops->stamp ? c->ops->stamp(l) : 0;
    *exact = 0;
    if (!g)
        return now;
    if (fresh)
        learn_offset(c, now, g);
    if (!c->gpu_cal)
        return now;
    *exact = 1;
    uint64_t s = g + (uint64_t)c->gpu_off;
    return s < now ? s : now;
}
