/* The NV channel's commands (put, launch, copy, release, acquire, wait), which Python's NvQueue calls
 * on its submit thread, compiled fills call through the NV ABI record, and the native thread's lane
 * operations (lanes_nv.c) and staged copies (nv_stage.c) call on the native thread.
 *
 * Dependencies run one way: lanes_nv.c and nv_stage.c call these; these call the channel itself
 * (nv_channel.c: nv_room, nv_after_peer, the kick) and never call back up.
 *
 * Threads: as every arig_nvq call (nv_channel.h).
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
