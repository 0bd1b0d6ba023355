// Can one CUDA graph hold a whole multi-GPU step (kernels on every GPU, peer copies between
// them, ordered by events), captured from one host thread? And what does issuing that step cost
// on the host, issued directly against replayed as one graph?
//
//   nvcc -O2 -o multi_device_graph multi_device_graph.cu && ./multi_device_graph [N] [STEPS]
//
// The copy between GPUs three ways: `cudaMemcpyPeerAsync` (peer), `cudaMemcpyAsync` between
// unified addresses with peer access on (uva), and a kernel on the destination GPU that reads the
// source through peer access (kernel).
//
// Each GPU holds a ring of N floats; a step adds 1 to every element on every GPU (a kernel), then
// copies the first 1024 elements of GPU i to the last 1024 of GPU (i+1) % G (a peer copy after an
// event of the source's stream; the source waits for the copy). After S steps every element is
// checked against the value the same steps give on the host.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <chrono>
#include <string>
#include <cuda_runtime.h>

static bool soft = false;
static bool failed = false;
#define CHECK(x) do { if (soft && failed) break; cudaError_t e0 = (x); if (soft && e0 != cudaSuccess) { \
    printf("  capture: %s: %s\n", #x, cudaGetErrorString(e0)); failed = true; break; } \
    if (e0 != cudaSuccess) { printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e0)); exit(1); } } while (0)

__global__ void pull(float *dst, const float *src, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

enum Copy { PEER, UVA, KERNEL };
static const char *copy_name[] = {"peer", "uva", "kernel"};

__global__ void add_one(float *a, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}

static const size_t SLAB = 1024;

struct Gpus {
    int g;
    size_t n;
    std::vector<float *> buf;
    std::vector<cudaStream_t> stream;
};

// One step on every GPU: issue only (nothing waits on the host).
static void step(Gpus &s, int kernels_per_gpu, Copy copy) {
    for (int i = 0; i < s.g; ++i) {
        CHECK(cudaSetDevice(i));
        for (int k = 0; k < kernels_per_gpu; ++k)
            add_one<<<(s.n + 255) / 256, 256, 0, s.stream[i]>>>(s.buf[i], s.n);
    }
    for (int i = 0; i < s.g; ++i) {
        int j = (i + 1) % s.g;
        cudaEvent_t written, copied;
        CHECK(cudaSetDevice(i));
        CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
        CHECK(cudaEventRecord(written, s.stream[i]));
        CHECK(cudaSetDevice(j));
        CHECK(cudaStreamWaitEvent(s.stream[j], written, 0));
        if (copy == PEER)
            CHECK(cudaMemcpyPeerAsync(s.buf[j] + s.n - SLAB, j, s.buf[i], i, SLAB * sizeof(float), s.stream[j]));
        else if (copy == UVA)
            CHECK(cudaMemcpyAsync(s.buf[j] + s.n - SLAB, s.buf[i], SLAB * sizeof(float), cudaMemcpyDefault, s.stream[j]));
        else
            pull<<<(SLAB + 255) / 256, 256, 0, s.stream[j]>>>(s.buf[j] + s.n - SLAB, s.buf[i], SLAB);
        CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
        CHECK(cudaEventRecord(copied, s.stream[j]));
        CHECK(cudaSetDevice(i));
        CHECK(cudaStreamWaitEvent(s.stream[i], copied, 0));
        CHECK(cudaEventDestroy(written));
        CHECK(cudaEventDestroy(copied));
    }
}

static void sync_all(Gpus &s) {
    for (int i = 0; i < s.g; ++i) { CHECK(cudaSetDevice(i)); CHECK(cudaStreamSynchronize(s.stream[i])); }
}

// The host reference of S steps from zeros (G rings).
static std::vector<std::vector<float>> reference(int g, size_t n, int steps, int kernels) {
    std::vector<std::vector<float>> a(g, std::vector<float>(n, 0.0f));
    for (int t = 0; t < steps; ++t) {
        for (auto &r : a) for (auto &v : r) v += kernels;
        for (int i = 0; i < g; ++i) {
            int j = (i + 1) % g;
            for (size_t k = 0; k < SLAB; ++k) a[j][n - SLAB + k] = a[i][k];
        }
    }
    return a;
}

static int check(Gpus &s, int steps, int kernels, const char *what) {
    auto ref = reference(s.g, s.n, steps, kernels);
    std::vector<float> h(s.n);
    int bad = 0;
    for (int i = 0; i < s.g; ++i) {
        CHECK(cudaSetDevice(i));
        CHECK(cudaMemcpy(h.data(), s.buf[i], s.n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < s.n; ++k) if (h[k] != ref[i][k]) { if (bad < 3) printf("  %s: GPU %d [%zu] = %g, expected %g\n", what, i, k, h[k], ref[i][k]); ++bad; }
    }
    printf("%s: %s\n", what, bad ? "WRONG" : "equal to the host reference");
    return bad;
}

static void reset(Gpus &s) {
    for (int i = 0; i < s.g; ++i) { CHECK(cudaSetDevice(i)); CHECK(cudaMemset(s.buf[i], 0, s.n * sizeof(float))); CHECK(cudaDeviceSynchronize()); }
}

int main(int argc, char **argv) {
    Gpus s;
    CHECK(cudaGetDeviceCount(&s.g));
    s.n = argc > 1 ? strtoull(argv[1], 0, 10) : 4096;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    int kernels = 8;  // launches per GPU per step, as a model's stages
    printf("GPUs: %d, %zu floats each, %d steps, %d kernels per GPU per step + 1 peer copy per GPU\n", s.g, s.n, steps, kernels);
    for (int i = 0; i < s.g; ++i) {
        CHECK(cudaSetDevice(i));
        for (int j = 0; j < s.g; ++j) { int can = 0; if (j != i) { cudaDeviceCanAccessPeer(&can, i, j); if (can) cudaDeviceEnablePeerAccess(j, 0); } }
        cudaGetLastError();
        float *p; CHECK(cudaMalloc(&p, s.n * sizeof(float))); s.buf.push_back(p);
        cudaStream_t st; CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)); s.stream.push_back(st);
    }
    int bad = 0;
    for (Copy copy : {UVA, KERNEL, PEER}) {
    // Direct issue.
    reset(s);
    step(s, kernels, copy); sync_all(s);
    reset(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < steps; ++t) step(s, kernels, copy);
    auto t1 = std::chrono::steady_clock::now();
    sync_all(s);
    auto t2 = std::chrono::steady_clock::now();
    bad += check(s, steps, kernels, (std::string("direct issue, ") + copy_name[copy]).c_str());
    double issue_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / steps;
    double total_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / steps;
    printf("%s direct: host issue %.1f us per step, wall %.1f us per step\n", copy_name[copy], issue_us, total_us);

    // One graph of the whole step, captured from stream 0: the other streams join by an event.
    reset(s);
    CHECK(cudaSetDevice(0));
    cudaGraph_t graph; cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s.stream[0], cudaStreamCaptureModeRelaxed));
    soft = true; failed = false;
    cudaEvent_t fork; CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventRecord(fork, s.stream[0]));
    for (int i = 1; i < s.g; ++i) { CHECK(cudaSetDevice(i)); CHECK(cudaStreamWaitEvent(s.stream[i], fork, 0)); }
    step(s, kernels, copy);
    for (int i = 1; i < s.g; ++i) {
        CHECK(cudaSetDevice(i));
        cudaEvent_t join; CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
        CHECK(cudaEventRecord(join, s.stream[i]));
        CHECK(cudaSetDevice(0));
        CHECK(cudaStreamWaitEvent(s.stream[0], join, 0));
    }
    CHECK(cudaSetDevice(0));
    soft = false;
    cudaError_t ended = cudaStreamEndCapture(s.stream[0], &graph);
    if (ended != cudaSuccess || failed) { printf("%s: capture across GPUs FAILED (%s)\n", copy_name[copy], cudaGetErrorString(ended)); cudaGetLastError(); sync_all(s); continue; }
    size_t nodes = 0; CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess) { printf("%s: instantiating the multi-GPU graph FAILED (%s)\n", copy_name[copy], cudaGetErrorString(inst)); continue; }
    printf("%s: captured one graph of %zu nodes across %d GPUs\n", copy_name[copy], nodes, s.g);
    CHECK(cudaGraphLaunch(exec, s.stream[0])); sync_all(s);
    reset(s);
    t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < steps; ++t) CHECK(cudaGraphLaunch(exec, s.stream[0]));
    t1 = std::chrono::steady_clock::now();
    CHECK(cudaSetDevice(0)); CHECK(cudaStreamSynchronize(s.stream[0])); sync_all(s);
    t2 = std::chrono::steady_clock::now();
    bad += check(s, steps, kernels, (std::string("one graph, ") + copy_name[copy]).c_str());
    printf("%s graph: host issue %.1f us per step, wall %.1f us per step\n", copy_name[copy],
           std::chrono::duration<double, std::micro>(t1 - t0).count() / steps,
           std::chrono::duration<double, std::micro>(t2 - t0).count() / steps);
    }
    return bad ? 1 : 0;
}
