/* The NV device's lanes (arig.nvrm: NVIDIA's kernel driver, no libcuda): each lane is a GPFIFO
 * channel (arig_nvq, nv_channel.c).  A burst's value is a semaphore release the GPU writes, with its
 * timer, into the lane's word; the backstop is a NON_STALL_INTERRUPT after the value, which wakes the
 * driver's event fd that the loop reads, asked for when a spin gives up and before a sleep on long
 * work; a fault is a change of the channel's error notifier.
 *
 * Uploads and downloads are items too (K_H2D, K_D2H: nv_stage.c's staged copies).  The channel's
 * commands they and the other items use are nv_commands.c's.
 */
#include "nv_channel.h"

#include <string.h>

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

