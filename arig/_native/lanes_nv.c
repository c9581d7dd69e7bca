/* The NV device's lanes (arig.nvrm: NVIDIA's kernel driver, no libcuda): each lane is a GPFIFO
 * channel (arig_nvq, nv_channel.c).  A burst's value is a semaphore release the GPU writes, with its
 * timer, into the lane's word; the backstop is a NON_STALL_INTERRUPT after the value, which wakes the
 * driver's event fd that the loop reads, asked for when a spin gives up and before a sleep on long
 * work; a fault is a change of the channel's error notifier.
 *
 * Uploads and downloads are items too (K_H2D, K_D2H: nv_stage.c's staged copies).
 * Also the channel's commands (put, launch, copy, release, acquire), which Python's NvQueue calls
 * on its submit thread and compiled fills call through the NV ABI record on the native thread.
 */
#include "nv_channel.h"

#include <string.h>

/* Append words as they are (the channel's first pushbuffer). */
int arig_nv_put(arig_nvq *q, const uint32_t *w, uint32_t n) {
    int rc = nv_room(q, n);
    if (rc)
        return rc;
    memcpy(q->words + q->nw, w, n * 4);
    q->nw += n;
    return 0;
}

int arig_nv_launch(arig_nvq *q, const arig_nv_launch_rec *l) {
    if (q->s.is_copy) {
        if (!q->peer)
            return NVE_ARG;
        q = q->peer;
    }
    if (!l || !l->image || l->qmd_offset % 256 || l->bytes < l->qmd_offset + 256 || l->lo_word >= 64 || l->hi_word >= 64)
        return NVE_ARG;
    int rc = nv_after_peer(q);
    if (!rc)
        rc = nv_room(q, q->s.launch.n);
    if (rc)
        return rc;
    int64_t off = nv_reserve_args(q, l->bytes);
    if (off < 0)
        return (int)off;
    uint8_t *at = (uint8_t *)(uintptr_t)q->s.args + off;
    uint64_t va = q->s.args_va + (uint64_t)off;
    memcpy(at, l->image, l->bytes);
    const uint32_t *qmd = (const uint32_t *)(l->image + l->qmd_offset);
    uint32_t lo = (uint32_t)(va >> 6), hi = (qmd[l->hi_word] & ~l->hi_mask) | ((uint32_t)(va >> 38) & l->hi_mask);
    volatile uint32_t *dst = (volatile uint32_t *)(at + l->qmd_offset);
    dst[l->lo_word] = lo;
    dst[l->hi_word] = hi;
    q->nw += nv_patch(&q->s.launch, (va + l->qmd_offset) >> 8, 0, 0, q->words + q->nw);
    return 0;
}

int arig_nv_copy(arig_nvq *q, uint64_t dst, uint64_t src, uint64_t nbytes) {
    if (!q->s.is_copy) {
        if (!q->peer)
            return NVE_ARG;
        q = q->peer;
    }
    if (dst >= (1ull << 57) || src >= (1ull << 57) || nbytes >= (1ull << 57) - src || nbytes >= (1ull << 57) - dst)
        return NVE_ARG;
    if (!nbytes)
        return 0;
    int rc = nv_after_peer(q);
    for (uint64_t done = 0; !rc && done < nbytes;) {
        uint64_t n = nbytes - done > NV_COPY_MAX ? NV_COPY_MAX : nbytes - done;
        rc = nv_room(q, q->s.copy.n);
        if (!rc)
            q->nw += nv_patch(&q->s.copy, src + done, dst + done, (uint32_t)n, q->words + q->nw);
        done += n;
    }
    return rc;
}

int arig_nv_release(arig_nvq *q, uint64_t address, uint64_t value) {
    if (address % 16 || address >= (1ull << 57))
        return NVE_ARG;
    int rc = nv_after_peer(q);
    if (!rc)
        rc = nv_room(q, q->s.release.n);
    if (!rc)
        q->nw += nv_patch(&q->s.release, address, value, 0, q->words + q->nw);
    return rc;
}

int arig_nv_acquire(arig_nvq *q, uint64_t address, uint64_t value) {
    if (address % 8 || address >= (1ull << 57))
        return NVE_ARG;
    int rc = nv_room(q, q->s.acquire.n);
    if (!rc)
        q->nw += nv_patch(&q->s.acquire, address, value, 0, q->words + q->nw);
    return rc;
}

/* Wait (bounded) until the GPU has done submission seq. */
int arig_nv_wait(arig_nvq *q, uint64_t seq) {
    if (seq > atomic_load(&q->seq))
        return NVE_ARG;
    return nv_wait(q, seq);
}

uint64_t arig_nv_seq(arig_nvq *q) { return atomic_load(&q->seq); }


/* The record compiled fills on an NV device receive (its queue is an arig_nvq *): what arig.nvrm's
 * NvQueue does, in C.  Each returns 0 or a negative NVE_* code. */
typedef struct arig_nv_abi {
    uint32_t version, size;
    int (*launch)(void *queue, const void *launch);
    int (*copy)(void *queue, uint64_t dst, uint64_t src, uint64_t nbytes);
    int (*release)(void *queue, uint64_t address, uint64_t value);
    int (*acquire)(void *queue, uint64_t address, uint64_t value);
} arig_nv_abi;

static const arig_nv_abi NV_ABI = {
    1, sizeof(arig_nv_abi), (int (*)(void *, const void *))arig_nv_launch, (int (*)(void *, uint64_t, uint64_t, uint64_t))arig_nv_copy,
    (int (*)(void *, uint64_t, uint64_t))arig_nv_release, (int (*)(void *, uint64_t, uint64_t))arig_nv_acquire,
};

const arig_nv_abi *arig_nv_abi_record(void) { return &NV_ABI; }

/* -- lane_ops ------------------------------------------------------------------------- */

static int nv_run_item(core_t *c, lane_t *l, const item_t *it) {
    (void)c;
    switch (it->kind) {
    case K_CFILL:
        return ((fill_fn)(uintptr_t)it->a)(l->hw, (void *)(uintptr_t)it->b, it->v);
    case K_LAUNCH:
        return arig_nv_launch(l->hw, (const arig_nv_launch_rec *)(uintptr_t)it->a);
    case K_H2D: /* a = GPU address, b = the program's memory, c = bytes */
        return arig_nv_stage_in(l->hw, it->a, (const void *)(uintptr_t)it->b, it->c);
    case K_D2H: /* a = the program's memory, b = GPU address, c = bytes */
        return arig_nv_stage_out(l->hw, (void *)(uintptr_t)it->a, it->b, it->c);
    case K_MARK:
        return 0;
    default:
        return NVE_KIND;
    }
}

static uint64_t nv_launch_key(uint64_t record) { return ((const arig_nv_launch_rec *)(uintptr_t)record)->key; }

/* Release v into the timeline word after all work so far (both queues'), and submit. */
static int nv_signal(core_t *c, lane_t *l, uint64_t v) {
    (void)c;
    int rc = nv_after_peer(l->hw);
    return rc ? rc : arig_nv_kick(l->hw, v, 1, 0, 0);
}

/* An interrupt once the word holds v, which wakes the loop's driver event fd. */
static int nv_backstop(core_t *c, lane_t *l, uint64_t v) {
    (void)c;
    return arig_nv_kick(l->hw, 0, 0, 1, v);
}

static int nv_check_fault(core_t *c, lane_t *l) {
    (void)c;
    return nv_channel_error(l->hw) ? NVE_CHANNEL : 0;
}

/* The GPU's timer, which the release wrote after the word. */
static uint64_t nv_stamp(const lane_t *l) { return *(volatile uint64_t *)(uintptr_t)l->hw_addr; }

static void nv_halt(lane_t *l) { atomic_store(&((arig_nvq *)l->hw)->halt, 1); }

static const lane_ops NV_LANES = {
    .run_item = nv_run_item,
    .launch_key = nv_launch_key,
    .signal = nv_signal,
    .backstop = nv_backstop,
    .check_fault = nv_check_fault,
    .stamp = nv_stamp,
    .signal_stamps = 1,
    .halt = nv_halt,
    .early_backstop = 1,
};

/* An NV device's core: lanes are its queues; each lane's word is the queue's timeline word. */
core_t *arig_core_create_nv(arig_nvq **qs, int nlanes, int efd, uint64_t cap, int64_t spin_ns, int64_t idle_ns, int64_t lead_ns, int prewake) {
    if (nlanes < 1 || nlanes > MAX_LANES)
        return 0;
    uint64_t words[MAX_LANES];
    for (int i = 0; i < nlanes; i++)
        words[i] = qs[i]->s.timeline;
    core_t *c = core_new(&NV_LANES, nlanes, words, efd, cap, spin_ns, idle_ns, lead_ns, prewake);
    if (!c)
        return 0;
    for (int i = 0; i < nlanes; i++) {
        c->lanes[i].hw = qs[i];
        c->lanes[i].hw_addr = qs[i]->s.timeline + 8;
    }
    return c;
}

