/* What every file of the native core shares: feature macros, the clock, internal visibility. */
#ifndef ARIG_CORE_H
#define ARIG_CORE_H

#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Functions the library's files share; not part of the C ABI that Python binds (arig_*). */
#define ARIG_INTERNAL __attribute__((visibility("hidden")))

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
