/* The NV GPFIFO channel itself: rings, templates and the kick that submits (see nv_channel.h).
 *
 * Dependencies run one way: the commands (nv_commands.c) call nv_room, nv_after_peer and the kick; the
 * kick reserves ring room and waits for the GPU, and never calls back up.
 */
#include "nv_channel.h"

#include <string.h>
#include <time.h>

uint32_t nv_patch(const arig_nv_tmpl *t, uint64_t a, uint64_t b, uint32_t c, uint32_t *out) {
    memcpy(out, t->w, t->n * 4);
    uint32_t v[5] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32), c};
    for (int i = 0; i < 5; i++)
        if (t->ix[i] >= 0)
            out[t->ix[i]] = v[i];
    return t->n;
}
int nv_channel_error(arig_nvq *q) {
    if (!q->s.notifier)
        return 0;
    uint8_t now[16];
    memcpy(now, (const void *)(uintptr_t)q->s.notifier, 16);
    return memcmp(now, q->s.notifier_base, 16) != 0;
}
static void ring_retire(nv_ring *r, uint64_t done) {
    while (r->fn && r->ftag[r->f0] <= done) {
        r->tail = r->fhead[r->f0];
        r->f0 = (r->f0 + 1) % NV_FCAP;
        r->fn--;
    }
}

static void ring_fence(nv_ring *r, uint64_t tag, uint64_t head) {
    uint32_t last = (r->f0 + r->fn + NV_FCAP - 1) % NV_FCAP;
    if (r->fn && r->ftag[last] == tag) {
        r->fhead[last] = head;
        return;
    }
    uint32_t i = (r->f0 + r->fn) % NV_FCAP;
    r->ftag[i] = tag;
    r->fhead[i] = head;
    r->fn++;
}

/* n bytes for submission tag, or -1 while the GPU holds the room (or every fence is taken). */
static int64_t ring_alloc(nv_ring *r, uint64_t n, uint64_t tag) {
    uint64_t off = r->head % r->size, pad = off + n > r->size ? r->size - off : 0;
    if (r->head + pad + n - r->tail > r->size)
        return -1;
    uint32_t last = (r->f0 + r->fn + NV_FCAP - 1) % NV_FCAP;
    if (r->fn == NV_FCAP && r->ftag[last] != tag)
        return -1;
    r->head += pad + n;
    ring_fence(r, tag, r->head);
    return pad ? 0 : (int64_t)off;
}

static void nv_retire(arig_nvq *q) {
    uint64_t done = *u64_at(q->s.progress);
    ring_retire(&q->pbr, done);
    ring_retire(&q->argr, done);
    nv_ring *g = &q->gpr;
    while (g->fn && g->ftag[g->f0] <= done) {
        q->gp_done = g->fhead[g->f0];
        g->f0 = (g->f0 + 1) % NV_FCAP;
        g->fn--;
    }
}

/* Wait until the GPU has done submission target: bounded, ended by a channel error or halt. */
int nv_wait(arig_nvq *q, uint64_t target) {
    uint64_t t0 = now_ns(), pause = 2000;
    while (*u64_at(q->s.progress) < target) {
        if (atomic_load(&q->halt))
            return NVE_HALTED;
        if (nv_channel_error(q))
            return NVE_CHANNEL;
        if (now_ns() - t0 > NV_WAIT_NS)
            return NVE_TIMEOUT;
        struct timespec ts = {0, (long)pause};
        nanosleep(&ts, 0);
        pause = pause * 2 > 1000000 ? 1000000 : pause * 2;
    }
    nv_retire(q);
    return 0;
}
/* Room for n bytes in ring r for submission tag: its offset, a negative NVE_* code, or NVE_HELD
 * when the room is held by words not submitted yet (only a kick frees it; the caller decides). */
static int64_t nv_reserve(arig_nvq *q, nv_ring *r, uint64_t n, uint64_t tag) {
    if (n > r->size)
        return NVE_ARG;
    for (;;) {
        nv_retire(q);
        int64_t off = ring_alloc(r, n, tag);
        if (off >= 0)
            return off;
        uint64_t oldest = r->ftag[r->f0];
        if (oldest > atomic_load_explicit(&q->seq, memory_order_relaxed))
            return NVE_HELD;
        int rc = nv_wait(q, oldest);
        if (rc)
            return rc;
    }
}

/* Submit the pending words, then the tail: a timeline release of value (has_value), an interrupt after
 * the timeline word holds value or wait_value (interrupt), and the progress release; one GPFIFO entry. */
int arig_nv_kick(arig_nvq *q, uint64_t value, int has_value, int interrupt, uint64_t wait_value) {
    uint32_t tail[4 * NV_TW];
    uint32_t n = 0;
    uint64_t seq = atomic_load_explicit(&q->seq, memory_order_relaxed) + 1;
    if (has_value)
        n += nv_patch(&q->s.rel_tl, value, 0, 0, tail + n);
    if (interrupt) {
        /* The interrupt wakes the loop's event fd: it must come after the value is in memory
         * (a copy engine release is asynchronous to the host; a compute one is waited for). */
        n += nv_patch(&q->s.wait_tl, has_value ? value : wait_value, 0, 0, tail + n);
        n += nv_patch(&q->s.intr, 0, 0, 0, tail + n);
    }
    n += nv_patch(&q->s.rel_prog, seq, 0, 0, tail + n);
    nv_retire(q);
    while (q->put - q->gp_done >= q->s.entries - 1 || q->gpr.fn == NV_FCAP) {
        int rc = nv_wait(q, q->gpr.ftag[q->gpr.f0]);
        if (rc)
            return rc;
    }
    uint64_t total = q->nw + n, bytes = (total * 4 + 255) / 256 * 256;
    /* Never NVE_HELD: the pushbuffer's fences are made only here, for a submission made at once. */
    int64_t off = nv_reserve(q, &q->pbr, bytes, seq);
    if (off < 0)
        return (int)off;
    uint8_t *seg = (uint8_t *)(uintptr_t)q->s.pb + off;
    memcpy(seg, q->words, q->nw * 4);
    memcpy(seg + q->nw * 4, tail, n * 4);
    uint64_t va = q->s.pb_va + (uint64_t)off;
    /* GP_ENTRY0: GET (31:2); GP_ENTRY1: GET_HI (7:0), LEVEL (9) = SUBROUTINE, LENGTH (30:10). */
    uint64_t entry = (va & 0xFFFFFFFCull) | ((((va >> 32) & 0xFF) | (1u << 9) | (total << 10)) << 32);
    u64_at(q->s.gpfifo)[q->put % q->s.entries] = entry;
    q->put++;
    ring_fence(&q->gpr, seq, q->put);
    q->nw = 0;
    atomic_store_explicit(&q->seq, seq, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* the write-combined pushbuffer and entry are out */
    volatile uint32_t *gp_put = (volatile uint32_t *)(uintptr_t)q->s.gp_put;
    *gp_put = (uint32_t)(q->put % q->s.entries);
    (void)*gp_put; /* read back: the write is out before the doorbell */
    atomic_thread_fence(memory_order_seq_cst);
    *(volatile uint32_t *)(uintptr_t)q->s.doorbell = q->s.token;
    return 0;
}

/* The argument ring's room for the next submission, submitting the pending words where they hold it. */
int64_t nv_reserve_args(arig_nvq *q, uint64_t n) {
    for (;;) {
        int64_t off = nv_reserve(q, &q->argr, n, atomic_load_explicit(&q->seq, memory_order_relaxed) + 1);
        if (off != NVE_HELD)
            return off;
        int rc = arig_nv_kick(q, 0, 0, 0, 0);
        if (rc)
            return rc;
    }
}

/* Room for n more pending words (submitting what is pending where it grew long). */
int nv_room(arig_nvq *q, uint32_t n) {
    if (n > NV_WCAP - NV_PENDING_MAX)
        return NVE_ARG;
    if (q->nw > NV_PENDING_MAX || q->nw + n > NV_WCAP)
        return arig_nv_kick(q, 0, 0, 0, 0);
    return 0;
}

/* The ordering rule: the peer's pending words go out, and this queue waits for them on the GPU. */
int nv_after_peer(arig_nvq *q) {
    arig_nvq *p = q->peer;
    if (!p)
        return 0;
    if (p->nw) {
        int rc = arig_nv_kick(p, 0, 0, 0, 0);
        if (rc)
            return rc;
    }
    uint64_t s = atomic_load_explicit(&p->seq, memory_order_relaxed);
    if (s > q->peer_acquired) {
        q->peer_acquired = s;
        if (*u64_at(p->s.progress) < s) {
            int rc = nv_room(q, p->s.wait_prog.n);
            if (rc)
                return rc;
            q->nw += nv_patch(&p->s.wait_prog, s, 0, 0, q->words + q->nw);
        }
    }
    return 0;
}

arig_nvq *arig_nv_create(const arig_nv_spec *s) {
    if (!s->entries || !s->pb_size || (s->args && !s->args_size))
        return 0;
    arig_nvq *q = calloc(1, sizeof *q);
    if (!q)
        return 0;
    q->s = *s;
    q->pbr.size = s->pb_size;
    q->argr.size = s->args ? s->args_size : 1;
    q->gpr.size = 1;
    return q;
}

void arig_nv_pair(arig_nvq *a, arig_nvq *b) {
    a->peer = b;
    b->peer = a;
}

void arig_nv_destroy(arig_nvq *q) { free(q); }

size_t arig_nv_sizeof_spec(void) { return sizeof(arig_nv_spec); }
size_t arig_nv_sizeof_launch(void) { return sizeof(arig_nv_launch_rec); }

/* For tests: a template with numbers patched in (returns the word count). */
uint32_t arig_nv_patch(const arig_nv_tmpl *t, uint64_t a, uint64_t b, uint32_t c, uint32_t *out) { return nv_patch(t, a, b, c, out); }
