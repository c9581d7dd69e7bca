/* Probe: how long the GPU takes to join another library's stream, by each way a runtime can.
 *
 * The "user's stream" U gets an empty kernel (a torch op's stand-in); then the join under test
 * makes a word in mapped host memory become k once U's work is done:
 *   event:   cuEventRecord(ev, U); cuStreamWaitEvent(J, ev); cuStreamWriteValue64(J, word, k)
 *            (the runtime's own join stream J waits for the event: arig's join lane)
 *   wait:    cuStreamWriteValue64(U, mark, k); cuStreamWaitValue64(J, mark, k, GEQ);
 *            cuStreamWriteValue64(J, word, k) (J waits on a memory word instead of an event)
 *   direct:  cuStreamWriteValue64(U, word, k) (the word written on the user's stream itself)
 * One thread launches, joins and spins on the word (it sees a store within ~0.1 us).  Reported
 * per way, rounds interleaved: the round trip from the launch to the word seen, the host time the
 * join's calls took, and (event and wait, with a mark written on U first, in rounds of their own)
 * the time from U's end (the mark seen) to the word seen: what the join adds on the GPU.
 *
 * Build and run (libcuda only, no toolkit headers):
 *   gcc -O2 -o /tmp/pj scripts/probe_join.c -ldl && /tmp/pj arig/kernels/kernels.cubin 2000
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *H;
static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(H *, int);
static CUresult (*cuCtxSetCurrent)(H);
static CUresult (*cuModuleLoad)(H *, const char *);
static CUresult (*cuModuleGetFunction)(H *, H, const char *);
static CUresult (*cuStreamCreate)(H *, unsigned);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemHostGetDevicePointer)(uint64_t *, void *, unsigned);
static CUresult (*cuStreamWriteValue64)(H, uint64_t, uint64_t, unsigned);
static CUresult (*cuStreamWaitValue64)(H, uint64_t, uint64_t, unsigned);
static CUresult (*cuEventCreate)(H *, unsigned);
static CUresult (*cuEventRecord)(H, H);
static CUresult (*cuStreamWaitEvent)(H, H, unsigned);
static CUresult (*cuLaunchKernel)(H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **);
static CUresult (*cuStreamSynchronize)(H);

#define CK(x)                                                                                                                              \
    do {                                                                                                                                   \
        CUresult r_ = (x);                                                                                                                 \
        if (r_) {                                                                                                                          \
            fprintf(stderr, "%s: %d\n", #x, r_);                                                                                           \
            exit(1);                                                                                                                       \
        }                                                                                                                                  \
    } while (0)

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *d, int n) {
    qsort(d, n, sizeof *d, cmp);
    printf("  %-34s p50 %6.2f  p90 %6.2f  p99 %7.2f  max %8.2f us\n", what, d[n / 2], d[n * 9 / 10], d[n * 99 / 100], d[n - 1]);
}

enum { EVENT, WAIT, DIRECT, NWAYS };
static const char *NAMES[NWAYS] = {"event (record, wait, write)", "wait (mark, wait value, write)", "direct (write on U)"};
static H U, J, ev, empty_fn;
static volatile uint64_t *word, *mark;
static uint64_t word_dev, mark_dev;

/* One round of way w with value k; marked: write the mark on U first (the wait way always writes
 * one, as part of its join).  Fills the round trip, the join's host time and the GPU's join time. */
static void round_of(int w, uint64_t k, int marked, double *rt, double *host, double *gpu) {
    uint64_t t0 = now_ns();
    CK(cuLaunchKernel(empty_fn, 1, 1, 1, 1, 1, 1, 0, U, 0, 0));
    if (marked && w != WAIT)
        CK(cuStreamWriteValue64(U, mark_dev, k, 0));
    uint64_t t1 = now_ns();
    if (w == EVENT) {
        CK(cuEventRecord(ev, U));
        CK(cuStreamWaitEvent(J, ev, 0));
        CK(cuStreamWriteValue64(J, word_dev, k, 0));
    } else if (w == WAIT) {
        CK(cuStreamWriteValue64(U, mark_dev, k, 0));
        CK(cuStreamWaitValue64(J, mark_dev, k, 0)); /* CU_STREAM_WAIT_VALUE_GEQ */
        CK(cuStreamWriteValue64(J, word_dev, k, 0));
    } else {
        CK(cuStreamWriteValue64(U, word_dev, k, 0));
    }
    uint64_t t2 = now_ns(), t_mark = 0, t;
    for (;;) {
        t = now_ns();
        if (!t_mark && *mark == k)
            t_mark = t;
        if (*word == k)
            break;
        __builtin_ia32_pause();
    }
    *rt = (double)(t - t0) / 1e3;
    *host = (double)(t2 - t1) / 1e3;
    *gpu = (double)(t - (t_mark ? t_mark : t)) / 1e3;
}

int main(int argc, char **argv) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "no libcuda\n");
        return 1;
    }
#define B(name, sym) *(void **)&name = dlsym(lib, sym)
    B(cuInit, "cuInit");
    B(cuDeviceGet, "cuDeviceGet");
    B(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    B(cuCtxSetCurrent, "cuCtxSetCurrent");
    B(cuModuleLoad, "cuModuleLoad");
    B(cuModuleGetFunction, "cuModuleGetFunction");
    B(cuStreamCreate, "cuStreamCreate");
    B(cuMemHostAlloc, "cuMemHostAlloc");
    B(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    B(cuStreamWriteValue64, "cuStreamWriteValue64_v2");
    B(cuStreamWaitValue64, "cuStreamWaitValue64_v2");
    B(cuEventCreate, "cuEventCreate");
    B(cuEventRecord, "cuEventRecord");
    B(cuStreamWaitEvent, "cuStreamWaitEvent");
    B(cuLaunchKernel, "cuLaunchKernel");
    B(cuStreamSynchronize, "cuStreamSynchronize");
    int n = argc > 2 ? atoi(argv[2]) : 2000, dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    H ctx, mod;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoad(&mod, argc > 1 ? argv[1] : "arig/kernels/kernels.cubin"));
    CK(cuModuleGetFunction(&empty_fn, mod, "empty"));
    CK(cuStreamCreate(&U, 1)); /* CU_STREAM_NON_BLOCKING, as torch's side streams */
    CK(cuStreamCreate(&J, 1));
    CK(cuEventCreate(&ev, 0x2)); /* CU_EVENT_DISABLE_TIMING */
    void *host;
    CK(cuMemHostAlloc(&host, 64, 0x2 | 0x1)); /* DEVICEMAP | PORTABLE */
    memset(host, 0, 64);
    word = host;
    mark = (volatile uint64_t *)host + 1;
    CK(cuMemHostGetDevicePointer(&word_dev, host, 0));
    mark_dev = word_dev + 8;
    double *rt[NWAYS], *hst[NWAYS], *gpu[NWAYS], junk;
    for (int w = 0; w < NWAYS; w++) {
        rt[w] = calloc((size_t)n, sizeof(double));
        hst[w] = calloc((size_t)n, sizeof(double));
        gpu[w] = calloc((size_t)n, sizeof(double));
    }
    uint64_t k = 0;
    for (int i = 0; i < 200; i++) /* warm-up */
        round_of(i % NWAYS, ++k, 0, &junk, &junk, &junk);
    for (int pass = 0; pass < 2; pass++) {
        int marked = pass == 1;
        for (int i = 0; i < n; i++)
            for (int w = 0; w < NWAYS; w++) {
                double r, h, g;
                round_of(w, ++k, marked, &r, &h, &g);
                if (!marked) {
                    rt[w][i] = r;
                    hst[w][i] = h;
                } else
                    gpu[w][i] = g;
            }
    }
    CK(cuStreamSynchronize(U));
    CK(cuStreamSynchronize(J));
    printf("joining a user's stream: an empty kernel on U, then the join; %d rounds per way, interleaved\n", n);
    for (int w = 0; w < NWAYS; w++) {
        printf("%s\n", NAMES[w]);
        report("round trip (launch to word seen)", rt[w], n);
        report("join's host calls", hst[w], n);
        report("GPU: U's end (mark) to word seen", gpu[w], n);
    }
    return 0;
}
