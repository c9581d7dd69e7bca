/* arig's completion helper: two functions that run without the GIL.
 *
 * arig_host_signal is the host function the CUDA device enqueues after a
 * burst of work (cuLaunchHostFunc).  It runs on libcuda's callback thread,
 * so it calls no CUDA function, takes no lock and never touches Python: it
 * notes the time and writes to an eventfd that the event loop watches
 * (loop.add_reader).  The loop then reads the timeline words the GPU wrote.
 *
 * arig_spin watches a timeline word for at most ns nanoseconds (called
 * through ctypes, so the GIL is released) and writes the same eventfd when
 * the word moves: a completion seen a few microseconds after the GPU's write
 * instead of when the driver's callback thread gets round to it.
 *
 * Built at run time by arig/cuda/_wake.py with the system C compiler; without
 * one arig falls back to libc's sem_post and a waiter thread.
 */
#include <stdint.h>
#include <time.h>
#include <unistd.h>

struct arig_signal {
    int efd;
    int pad;
    volatile uint64_t t_ns; /* CLOCK_MONOTONIC when the host function ran */
};

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void arig_host_signal(void *p) {
    struct arig_signal *s = (struct arig_signal *)p;
    uint64_t one = 1;
    s->t_ns = now_ns();
    ssize_t r = write(s->efd, &one, sizeof one);
    (void)r; /* EAGAIN: the counter is saturated, the loop is awake anyway */
}

uint64_t arig_spin(volatile uint64_t *word, uint64_t last, int64_t ns, int efd, volatile uint64_t *t_seen) {
    uint64_t end = now_ns() + (uint64_t)ns;
    for (;;) {
        uint64_t v = *word;
        if (v > last) {
            uint64_t one = 1;
            *t_seen = now_ns();
            ssize_t r = write(efd, &one, sizeof one);
            (void)r;
            return v;
        }
        if (now_ns() > end)
            return v;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}
