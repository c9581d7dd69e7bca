/* Probe: how soon a thread blocked in cuEventSynchronize on a blocking-sync event wakes after the
 * GPU reaches the event, against a host function (cuLaunchHostFunc) and against a spinning thread,
 * and what each costs in CPU.
 *
 * Each round: spin(L) on a non-blocking stream, then cuStreamWriteValue64 of a word in mapped host
 * memory (value k), then the waker under test (an event record, or a host function).  A spinner
 * thread watches the word (the end as a spin sees it, within ~0.1 us); the waiter thread (or the
 * host function) stamps CLOCK_MONOTONIC as soon as it runs.  Reported: the waker's time after the
 * spinner's, p50 / p90 / p99 / max, and the waiter thread's CPU per wait.  Also how long a launch
 * takes on the main thread while the waiter sits in cuEventSynchronize (a lock of libcuda's would show).
 *
 * Build and run (libcuda only, no toolkit headers):
 *   gcc -O2 -o /tmp/pew scripts/probe_event_wait.c -ldl -lpthread && /tmp/pew arig/kernels/kernels.cubin
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

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
static CUresult (*cuEventCreate)(H *, unsigned);
static CUresult (*cuEventRecord)(H, H);
static CUresult (*cuEventSynchronize)(H);
static CUresult (*cuEventQuery)(H);
static CUresult (*cuLaunchKernel)(H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **);
static CUresult (*cuLaunchHostFunc)(H, void (*)(void *), void *);
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
static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static H ctx, stream, spin_fn, empty_fn;
static volatile uint64_t *word;
static uint64_t word_dev;
static _Atomic uint64_t t_spin, t_wake, go_spin, go_wait, waiter_cpu;
static H ev_now;
static _Atomic int quit;

static void *spinner(void *p) {
    (void)p;
    for (;;) {
        uint64_t k;
        while (!(k = atomic_load(&go_spin)) && !atomic_load(&quit))
            __builtin_ia32_pause();
        if (atomic_load(&quit))
            return 0;
        atomic_store(&go_spin, 0);
        while (*word < k)
            __builtin_ia32_pause();
        atomic_store(&t_spin, now_ns());
    }
}

static void *waiter(void *p) {
    (void)p;
    prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);
    CK(cuCtxSetCurrent(ctx));
    for (;;) {
        uint64_t k;
        while (!(k = atomic_load(&go_wait)) && !atomic_load(&quit))
            usleep(50);
        if (atomic_load(&quit))
            return 0;
        atomic_store(&go_wait, 0);
        uint64_t c0 = cpu_ns();
        CK(cuEventSynchronize(ev_now));
        atomic_store(&t_wake, now_ns());
        atomic_store(&waiter_cpu, cpu_ns() - c0);
    }
}

static void hostfn(void *p) {
    (void)p;
    atomic_store(&t_wake, now_ns());
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *d, int n, double *cpu) {
    qsort(d, n, sizeof *d, cmp);
    double c = 0;
    for (int i = 0; i < n; i++)
        c += cpu ? cpu[i] : 0;
    printf("%-44s p50 %7.1f  p90 %7.1f  p99 %7.1f  max %8.1f us", what, d[n / 2], d[n * 9 / 10], d[n * 99 / 100], d[n - 1]);
    if (cpu)
        printf("   waiter CPU %.1f us/wait", c / n);
    printf("\n");
}

/* mode 0: blocking event + waiter thread; 1: host function; 2: default event + waiter (spins). */
static void run(int mode, uint64_t len_ns, int n, H ev) {
    double *d = calloc(n, sizeof *d), *cpu = calloc(n, sizeof *cpu);
    static uint64_t k = 0;
    for (int i = 0; i < n; i++) {
        k++;
        void *params[1] = {&len_ns};
        atomic_store(&go_spin, k);
        CK(cuLaunchKernel(spin_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, 0));
        CK(cuStreamWriteValue64(stream, word_dev, k, 0));
        atomic_store(&t_wake, 0);
        if (mode == 1) {
            CK(cuLaunchHostFunc(stream, hostfn, 0));
        } else {
            CK(cuEventRecord(ev, stream));
            ev_now = ev;
            atomic_store(&go_wait, k);
        }
        CK(cuStreamSynchronize(stream));
        while (!atomic_load(&t_wake) || !atomic_load(&t_spin) || atomic_load(&go_wait))
            usleep(10);
        uint64_t ts = atomic_load(&t_spin), tw = atomic_load(&t_wake);
        d[i] = ((double)tw - (double)ts) / 1e3;
        cpu[i] = (double)atomic_load(&waiter_cpu) / 1e3;
        atomic_store(&t_spin, 0);
        usleep(200 + (unsigned)(rand() % 300)); /* let the CPUs go idle, as between a server's waits */
    }
    char what[80];
    snprintf(what, sizeof what, "%s, %.3f ms", mode == 0 ? "blocking event + waiter" : mode == 1 ? "host function" : "default event + waiter",
             len_ns / 1e6);
    report(what, d, n, mode == 1 ? 0 : cpu);
    free(d);
    free(cpu);
}

/* Launch cost on this thread while the waiter sits in cuEventSynchronize on long work. */
static void launch_cost(H ev, int blocked) {
    uint64_t len = 20000000ull;
    void *params[1] = {&len};
    CK(cuLaunchKernel(spin_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, 0));
    H s2;
    CK(cuStreamCreate(&s2, 1));
    if (blocked) {
        CK(cuEventRecord(ev, stream));
        ev_now = ev;
        atomic_store(&go_wait, 1);
        usleep(2000);
    }
    double d[200];
    for (int i = 0; i < 200; i++) {
        uint64_t t = now_ns();
        CK(cuLaunchKernel(empty_fn, 1, 1, 1, 1, 1, 1, 0, s2, 0, 0));
        d[i] = (double)(now_ns() - t) / 1e3;
    }
    CK(cuStreamSynchronize(stream));
    CK(cuStreamSynchronize(s2));
    while (atomic_load(&go_wait))
        usleep(10);
    report(blocked ? "launch on another stream, waiter blocked" : "launch on another stream, no waiter", d, 200, 0);
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
    B(cuEventCreate, "cuEventCreate");
    B(cuEventRecord, "cuEventRecord");
    B(cuEventSynchronize, "cuEventSynchronize");
    B(cuEventQuery, "cuEventQuery");
    B(cuLaunchKernel, "cuLaunchKernel");
    B(cuLaunchHostFunc, "cuLaunchHostFunc");
    B(cuStreamSynchronize, "cuStreamSynchronize");
    int n = argc > 2 ? atoi(argv[2]) : 200;
    int dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    H mod;
    CK(cuModuleLoad(&mod, argc > 1 ? argv[1] : "arig/kernels/kernels.cubin"));
    CK(cuModuleGetFunction(&spin_fn, mod, "spin"));
    CK(cuModuleGetFunction(&empty_fn, mod, "empty"));
    CK(cuStreamCreate(&stream, 1));
    void *host;
    CK(cuMemHostAlloc(&host, 64, 0x2 | 0x1)); /* DEVICEMAP | PORTABLE */
    memset(host, 0, 64);
    word = host;
    CK(cuMemHostGetDevicePointer(&word_dev, host, 0));
    H ev_block, ev_default;
    CK(cuEventCreate(&ev_block, 0x1 | 0x2)); /* BLOCKING_SYNC | DISABLE_TIMING */
    CK(cuEventCreate(&ev_default, 0x2));
    pthread_t a, b;
    pthread_create(&a, 0, spinner, 0);
    pthread_create(&b, 0, waiter, 0);
    uint64_t lens[] = {0, 50000, 1000000, 10000000};
    for (int r = 0; r < 2; r++)
        for (unsigned j = 0; j < sizeof lens / sizeof *lens; j++) {
            int m = lens[j] >= 10000000 ? n / 4 : n;
            run(0, lens[j], m, ev_block);
            run(1, lens[j], m, 0);
            if (lens[j] <= 1000000)
                run(2, lens[j], m, ev_default);
        }
    launch_cost(ev_block, 0);
    launch_cost(ev_block, 1);
    atomic_store(&quit, 1);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
