// Kernels for the cubin parser's tests (arig.nvrm._cubin): parameters of every size and
// alignment, static shared memory, and a local array the compiler must keep on the stack.
// Built by build.sh with nvcc 13.0 into probe.sm_90.cubin (committed: CI has no nvcc).
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void tile(const float *in, float *out, int n) {
    __shared__ float buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = buf[255 - threadIdx.x];
}

extern "C" __global__ void deep(int *out, const int *in, char c, double d, unsigned long long u) {
    int local[64];
    for (int j = 0; j < 64; j++) local[j] = in[j] * c;
    out[threadIdx.x] = local[in[64 + threadIdx.x] & 63] + (int)d + (int)u;
}
