/* An NV GPFIFO channel driven from user space (arig_nvq), for the commands (nv_commands.c), lanes_nv.c and Python's NvQueue.
 *
 * Work is pushbuffer words written into a ring of GPU-visible memory, named by a GPFIFO entry, made
 * visible by GP_PUT in USERD and a doorbell write.  One arig_nvq per channel.  Every encoding comes
 * from Python (arig.nvrm._push) as word templates with the places to patch; this code only patches
 * numbers in and manages the rings.
 *
 * Who calls what: the core's native thread (launches, marks, C fills, completions), or the device's
 * Python submit thread (open, Python fills while the native thread waits at their gate, staging):
 * never both at once.  Waits for ring room are bounded and end on a channel error, a lost or
 * stopping device (halt), or after NV_WAIT_NS.
 */
#ifndef ARIG_NV_CHANNEL_H
#define ARIG_NV_CHANNEL_H

#include "core.h"

#define NV_TW 24
#define NV_FCAP 4096
#define NV_WCAP (64u << 10)        /* pending words a queue holds */
#define NV_PENDING_MAX (16u << 10) /* pending words before they are submitted unasked */
#define NV_WAIT_NS 30000000000ull
#define NV_COPY_MAX ((1ull << 31) - 1)
/* Fault codes of NV work (the core's fault word; a C fill's own nonzero result is positive).
 * NVE_HELD never leaves this library: room a ring holds for words not submitted yet. */
enum { NVE_CHANNEL = -100, NVE_TIMEOUT = -101, NVE_HALTED = -102, NVE_ARG = -103, NVE_KIND = -104, NVE_HELD = -199 };

/* Words with numbers to patch in: w[ix[0]], w[ix[1]] = lo, hi of a; w[ix[2]], w[ix[3]] = lo, hi of b;
 * w[ix[4]] = c (32 bits).  -1: not patched. */
typedef struct arig_nv_tmpl {
    uint32_t n;
    int32_t ix[5];
    uint32_t w[NV_TW];
} arig_nv_tmpl;

/* What Python gives for a queue (host addresses unless said otherwise). */
typedef struct arig_nv_spec {
    uint64_t pb, pb_va, pb_size;       /* the pushbuffer ring: host mapping, GPU address, bytes */
    uint64_t args, args_va, args_size; /* the argument ring (args 0: a copy queue) */
    uint64_t gpfifo, gp_put, doorbell, progress, timeline, notifier;
    uint32_t entries, token, is_copy, pad;
    uint8_t notifier_base[16]; /* the notifier before any error */
    arig_nv_tmpl rel_tl;       /* release of the timeline word: a = value */
    arig_nv_tmpl rel_prog;     /* release of the progress word: a = submission */
    arig_nv_tmpl wait_prog;    /* acquire of the progress word (the peer puts it): a = submission */
    arig_nv_tmpl wait_tl;      /* acquire of the timeline word: a = value */
    arig_nv_tmpl intr;         /* NON_STALL_INTERRUPT */
    arig_nv_tmpl launch;       /* a launch: a = the QMD's address >> 8 */
    arig_nv_tmpl copy;         /* one copy: a = source, b = destination, c = bytes (at most NV_COPY_MAX) */
    arig_nv_tmpl release;      /* this queue's release: a = address, b = value */
    arig_nv_tmpl acquire;      /* an acquire (ACQ_CIRC_GEQ): a = address, b = value */
} arig_nv_spec;

/* A prepared launch (arig.nvrm.Launch keeps one): its argument-ring slot's image (constant bank 0,
 * then the QMD at qmd_offset), and where in the QMD bank 0's address goes. */
typedef struct arig_nv_launch_rec {
    const uint8_t *image;
    uint32_t bytes, qmd_offset;
    uint32_t lo_word, hi_word, hi_mask, pad; /* QMD words: (address >> 6), (address >> 38) & hi_mask */
    uint64_t key;                            /* what predicts its duration (kernel, grid, block) */
} arig_nv_launch_rec;

typedef struct nv_ring {
    uint64_t size, head, tail;
    uint64_t ftag[NV_FCAP], fhead[NV_FCAP];
    uint32_t f0, fn;
} nv_ring;

/* The device's pinned staging area (host address = GPU address), on its copy queue: count slots of
 * slot bytes used round-robin, each remembering the submission that last used it (nv_stage.c). */
#define NV_STAGE_SLOTS 16
typedef struct nv_stage {
    uint64_t base, slot; /* slot 0: the queue has no staging area */
    uint32_t count, next;
    uint64_t seq[NV_STAGE_SLOTS];
} nv_stage;

typedef struct arig_nvq {
    arig_nv_spec s;
    nv_stage st;
    struct arig_nvq *peer;
    _Atomic int32_t halt;
    _Atomic uint64_t seq; /* submissions made (the progress word's values) */
    uint64_t put, gp_done, peer_acquired;
    nv_ring pbr, argr, gpr; /* gpr: fences only (submission, entries put after it) */
    uint32_t nw;
    uint32_t words[NV_WCAP];
} arig_nvq;

static inline volatile uint64_t *u64_at(uint64_t a) { return (volatile uint64_t *)(uintptr_t)a; }

/* Template t with a, b, c patched in, at out; returns its word count. */
ARIG_INTERNAL uint32_t nv_patch(const arig_nv_tmpl *t, uint64_t a, uint64_t b, uint32_t c, uint32_t *out);
/* 1 once the channel's error notifier changed. */
ARIG_INTERNAL int nv_channel_error(arig_nvq *q);
/* Wait until the GPU has done submission target: bounded, ended by a channel error or halt. */
ARIG_INTERNAL int nv_wait(arig_nvq *q, uint64_t target);
/* Room for n more pending words (submitting what is pending where it grew long). */
ARIG_INTERNAL int nv_room(arig_nvq *q, uint32_t n);
/* The ordering rule: the peer's pending words go out, and this queue waits for them on the GPU. */
ARIG_INTERNAL int nv_after_peer(arig_nvq *q);
/* n bytes of the argument ring for the next submission: its offset, or a negative NVE_* code. */
ARIG_INTERNAL int64_t nv_reserve_args(arig_nvq *q, uint64_t n);

int arig_nv_kick(arig_nvq *q, uint64_t value, int has_value, int interrupt, uint64_t wait_value);
int arig_nv_launch(arig_nvq *q, const arig_nv_launch_rec *l);
int arig_nv_copy(arig_nvq *q, uint64_t dst, uint64_t src, uint64_t nbytes);
/* Staged copies between the program's memory and GPU addresses (nv_stage.c): on either queue of a
 * pair, through the copy queue's staging area; each returns once its bytes are where they go (a
 * download) or in the staging area with their copies submitted (an upload). */
int arig_nv_stage_in(arig_nvq *q, uint64_t dst, const void *src, uint64_t nbytes);
int arig_nv_stage_out(arig_nvq *q, void *dst, uint64_t src, uint64_t nbytes);

#endif
