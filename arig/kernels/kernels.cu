// Kernels arig ships for its demo, tests and benchmarks.
// Build: scripts/build_kernels.sh -> kernels.fatbin (SASS for sm_75 ... sm_121, PTX for the newest).
// The names and signatures are a contract: tests/test_kernels_image.py checks them in every architecture.
#include <stdint.h>

extern "C" {

// y = a*x + y
__global__ void saxpy(float a, const float *x, float *y, int32_t n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Does nothing: the launch floor.
__global__ void empty() {}

// Spins for ns nanoseconds of the GPU's global timer.
__global__ void spin(uint64_t ns) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// spin, stamped: out[2*index] = start, out[2*index+1] = end (global timer ns), written by the
// first thread of the grid, so a benchmark reads the kernel's own GPU time back per sample.
__global__ void spin_stamped(uint64_t ns, uint64_t *out, uint32_t index) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[2 * (uint64_t)index] = start;
        out[2 * (uint64_t)index + 1] = now;
    }
}

// Stores value at out[index]: lets tests see which launch ran with which arguments.
__global__ void store(uint64_t *out, uint32_t index, uint64_t value) { out[index] = value; }

// out[index] = out[index] * 2 + value: order-sensitive, so a test sees the order of launches.
__global__ void step(uint64_t *out, uint32_t index, uint64_t value) { out[index] = out[index] * 2 + value; }

// Faults the context with an illegal-instruction trap.
__global__ void trap() { asm volatile("trap;"); }

// Faults the context with an illegal address.
__global__ void illegal(uint64_t *p) { *(volatile uint64_t *)p = 1; }

}
