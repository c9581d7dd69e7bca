/* The NV device's uploads and downloads: staged copies through its pinned staging area, run by the
 * core's native thread as one item each (K_H2D, K_D2H), so a copy of any size takes no Python
 * thread, no GIL and no hand-off between threads.
 *
 * An upload memcpys each chunk into a slot the GPU no longer reads and submits a copy-engine copy
 * slot -> buffer; a download submits buffer -> slot copies, with up to every slot in flight, and
 * memcpys each out once the copy queue's progress word says it is done.  Every copy goes to the
 * copy queue, after the compute queue's work (nv_after_peer, in arig_nv_copy): a download reads
 * what the kernels before it wrote.
 *
 * Threads: as every arig_nvq call (nv_channel.h): the native thread, or the submit thread while the
 * native thread waits at a Python fill's gate; never both at once.
 */
#include "nv_channel.h"

#include <string.h>

/* How long a copy's wait spins before nv_wait's sleeps: a small copy is done in microseconds. */
#define NV_COPY_SPIN_NS 20000ull

static arig_nvq *copy_queue(arig_nvq *q) { return q->s.is_copy ? q : q->peer; }

/* Set the staging area of the copy queue of q's pair: size bytes at base, cut into count slots. */
int arig_nv_staging(arig_nvq *q, uint64_t base, uint64_t size, uint32_t count) {
    q = copy_queue(q);
    if (!q || !base || !count || count > NV_STAGE_SLOTS || size / count == 0)
        return NVE_ARG;
    memset(&q->st, 0, sizeof q->st);
    q->st.base = base;
    q->st.slot = size / count;
    q->st.count = count;
    return 0;
}

/* Wait until the GPU has done submission seq: a short spin, then nv_wait's bounded sleeps. */
static int copy_wait(arig_nvq *q, uint64_t seq) {
    uint64_t t0 = now_ns();
    while (*u64_at(q->s.progress) < seq && now_ns() - t0 < NV_COPY_SPIN_NS)
        cpu_relax();
    return nv_wait(q, seq);
}

/* The next slot, once the GPU no longer reads it: its index, or a negative NVE_* code. */
static int64_t take_slot(arig_nvq *q) {
    nv_stage *st = &q->st;
    uint32_t i = st->next;
    st->next = (i + 1) % st->count;
    int rc = copy_wait(q, st->seq[i]);
    return rc ? rc : (int64_t)i;
}

/* Submit one chunk's copy (already in the pending words) and record the slot's submission. */
static int submit_chunk(arig_nvq *q, uint32_t slot) {
    int rc = arig_nv_kick(q, 0, 0, 0, 0);
    if (!rc)
        q->st.seq[slot] = atomic_load_explicit(&q->seq, memory_order_relaxed);
    return rc;
}

/* The copy queue of q's pair, if it has a staging area and the GPU range [gpu, gpu + n) is addressable. */
static arig_nvq *stager(arig_nvq *q, uint64_t gpu, uint64_t n) {
    q = copy_queue(q);
    if (!q || !q->st.slot || gpu >= (1ull << 57) || n >= (1ull << 57) - gpu)
        return 0;
    return q;
}

int arig_nv_stage_in(arig_nvq *q, uint64_t dst, const void *src, uint64_t nbytes) {
    q = stager(q, dst, nbytes);
    if (!q || (nbytes && !src))
        return NVE_ARG;
    const uint8_t *from = src;
    for (uint64_t off = 0; off < nbytes;) {
        uint64_t n = nbytes - off < q->st.slot ? nbytes - off : q->st.slot;
        int64_t i = take_slot(q);
        if (i < 0)
            return (int)i;
        uint64_t at = q->st.base + (uint64_t)i * q->st.slot;
        memcpy((void *)(uintptr_t)at, from + off, n);
        int rc = arig_nv_copy(q, dst + off, at, n);
        if (!rc)
            rc = submit_chunk(q, (uint32_t)i);
        if (rc)
            return rc;
        off += n;
    }
    return 0;
}

/* A download's chunk in flight: its slot and where its bytes go. */
typedef struct flight {
    uint32_t slot;
    uint64_t off, n;
} flight;

/* Wait for the oldest chunk in flight and memcpy it out of its slot. */
static int land(arig_nvq *q, uint8_t *to, const flight *f) {
    int rc = copy_wait(q, q->st.seq[f->slot]);
    atomic_thread_fence(memory_order_acquire); /* the slot's bytes are read after the progress word said they are in */
    if (!rc)
        memcpy(to + f->off, (const void *)(uintptr_t)(q->st.base + f->slot * q->st.slot), f->n);
    return rc;
}

int arig_nv_stage_out(arig_nvq *q, void *dst, uint64_t src, uint64_t nbytes) {
    q = stager(q, src, nbytes);
    if (!q || (nbytes && !dst))
        return NVE_ARG;
    uint8_t *to = dst;
    flight fl[NV_STAGE_SLOTS];
    uint32_t f0 = 0, fn = 0, cap = q->st.count;
    int rc = 0;
    for (uint64_t off = 0; !rc && off < nbytes;) {
        if (fn == cap) {
            rc = land(q, to, &fl[f0]);
            f0 = (f0 + 1) % cap;
            fn--;
            continue;
        }
        uint64_t n = nbytes - off < q->st.slot ? nbytes - off : q->st.slot;
        int64_t i = take_slot(q);
        if (i < 0)
            return (int)i;
        rc = arig_nv_copy(q, q->st.base + (uint64_t)i * q->st.slot, src + off, n);
        if (!rc)
            rc = submit_chunk(q, (uint32_t)i);
        fl[(f0 + fn++) % cap] = (flight){(uint32_t)i, off, n};
        off += n;
    }
    for (; !rc && fn; fn--, f0 = (f0 + 1) % cap)
        rc = land(q, to, &fl[f0]);
    return rc;
}
