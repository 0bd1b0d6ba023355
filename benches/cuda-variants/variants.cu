// Hand-written variants of the z-marching kernel, for decisions about the generator (timing
// only: the generated kernels are measured by `gpu_bench`, which prints them in-process).
// 512³ f32 on the project's padded layouts (pitch 576, interior aligned to 32 elements):
// R = 1 is the 7-point diffusion update (f -> g), R = 4 the 25-point acoustic update
// (u, u_prev, v2 -> u_next). Each variant's output is compared with the first of its stencil.
//
//   star<R, L, BX, BY, PPT, PF, ORD, ALT, FRESH>: z-march with L lanes (float4/float2), PF planes
//     of lookahead on every queue, ORD = z-chunks fastest in launch order, ALT = odd chunks march
//     down; FRESH = order of the loads: 0 in-plane neighbours, centre, point fields; 1 centre and
//     point fields first; 2 centre, neighbours, point fields.
//   smem25<R, L, BX, BY, PPT>: 2.5D, the u plane with its halo in shared memory (double-buffered,
//     one barrier per plane), the o column in registers with one plane of lookahead, the next
//     plane's halo loaded into registers a step ahead.
//
// Build and run on the GPU machine: nvcc -arch=sm_90 -O3 -fmad=false -std=c++17 -o variants
// variants.cu && ./variants (PROFILE=1 runs each kernel once, for ncu).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cmath>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

template <int L> struct V;
template <> struct V<4> { typedef float4 t; };
template <> struct V<2> { typedef float2 t; };
template <> struct V<1> { typedef float t; };
__device__ __forceinline__ float comp(float4 v, int l) { return l == 0 ? v.x : l == 1 ? v.y : l == 2 ? v.z : v.w; }
__device__ __forceinline__ float comp(float2 v, int l) { return l == 0 ? v.x : v.y; }
__device__ __forceinline__ float comp(float v, int) { return v; }
__device__ __forceinline__ float4 mk(const float* o, float4) { return make_float4(o[0], o[1], o[2], o[3]); }
__device__ __forceinline__ float2 mk(const float* o, float2) { return make_float2(o[0], o[1]); }
__device__ __forceinline__ float mk(const float* o, float) { return o[0]; }

__device__ __forceinline__ float coef(int m) {
  return m == 0 ? (-205.f / 72.f) : m == 1 ? (8.f / 5.f) : m == 2 ? (-1.f / 5.f) : m == 3 ? (8.f / 315.f) : (-1.f / 560.f);
}

// R = 1: 7-point diffusion (f -> g). R = 4: acoustic (u, up, v2 -> un).
// PF: lookahead planes (every queue). ORD: z-chunks fastest in launch order. ALT: odd z-chunks march down.
// FRESH: streaming loads (new centre plane, point fields) issued before the in-plane neighbours.
template <int R, int L, int PPT, int PF, int DIR, int FRESH, class T>
__device__ __forceinline__ void march(const float* __restrict__ u, const float* __restrict__ up,
    const float* __restrict__ v2, float* __restrict__ out, long long idx, int c, int n_c, int steps) {
  constexpr long long S_M = 576, S_O = 576LL * (512 + 2 * R);
  constexpr int G = (R + L - 1) / L;
  constexpr int DC = 2 * R + 1 + PF;
  constexpr int DI = 1 + PF;
  T qc[DC], qx[2 * G][DI], qy[2 * R][DI], qp[2][DI];
  auto ld = [&](const float* p, long long off) { return __ldg(reinterpret_cast<const T*>(p + off)); };
  // slot j of qc holds plane offset DIR * (j - R)
#pragma unroll
  for (int j = 0; j < DC - 1; ++j)
    if (j <= 2 * R || j - 2 * R < steps) qc[j] = ld(u, idx + DIR * (j - R) * S_O);
#pragma unroll
  for (int j = 0; j < DI - 1; ++j) {
    if (j < steps) {
#pragma unroll
      for (int g = 0; g < G; ++g) { qx[g][j] = ld(u, idx + DIR * j * S_O - (g + 1) * L); qx[G + g][j] = ld(u, idx + DIR * j * S_O + (g + 1) * L); }
#pragma unroll
      for (int d = 0; d < R; ++d) { qy[d][j] = ld(u, idx + DIR * j * S_O - (d + 1) * S_M); qy[R + d][j] = ld(u, idx + DIR * j * S_O + (d + 1) * S_M); }
      if (R > 1) { qp[0][j] = ld(up, idx + DIR * j * S_O); qp[1][j] = ld(v2, idx + DIR * j * S_O); }
    }
  }
  for (int s = 0; s < steps; ++s, idx += DIR * S_O) {
    const long long ahead = idx + DIR * PF * S_O;
    if (s + PF < steps) {
      if (FRESH >= 1) qc[DC - 1] = ld(u, idx + DIR * (R + PF) * S_O);
      if (FRESH == 1 && R > 1) { qp[0][DI - 1] = ld(up, ahead); qp[1][DI - 1] = ld(v2, ahead); }
#pragma unroll
      for (int g = 0; g < G; ++g) { qx[g][DI - 1] = ld(u, ahead - (g + 1) * L); qx[G + g][DI - 1] = ld(u, ahead + (g + 1) * L); }
#pragma unroll
      for (int d = 0; d < R; ++d) { qy[d][DI - 1] = ld(u, ahead - (d + 1) * S_M); qy[R + d][DI - 1] = ld(u, ahead + (d + 1) * S_M); }
      if (FRESH == 0) qc[DC - 1] = ld(u, idx + DIR * (R + PF) * S_O);
      if (FRESH != 1 && R > 1) { qp[0][DI - 1] = ld(up, ahead); qp[1][DI - 1] = ld(v2, ahead); }
    }
    float o[L];
#pragma unroll
    for (int l = 0; l < L; ++l) {
      auto cx = [&](int dc) -> float {
        int p = l + dc;
        int g = p >= 0 ? p / L : -((-p + L - 1) / L);
        int k = p - g * L;
        if (g == 0) return comp(qc[R], k);
        return g < 0 ? comp(qx[-g - 1][0], k) : comp(qx[G + g - 1][0], k);
      };
      auto cz = [&](int d) -> float { return comp(qc[R + DIR * d], l); };
      const float cv = comp(qc[R], l);
      if (R == 1) {
        o[l] = 0.4f * cv + 0.1f * cx(1) + 0.1f * cx(-1) + 0.1f * comp(qy[R][0], l) + 0.1f * comp(qy[0][0], l) + 0.1f * cz(1) + 0.1f * cz(-1);
      } else {
        float lap = 3.f * coef(0) * cv;
#pragma unroll
        for (int d = 1; d <= R; ++d)
          lap += coef(d) * (((((cx(d) + cx(-d)) + comp(qy[R + d - 1][0], l)) + comp(qy[d - 1][0], l)) + cz(d)) + cz(-d));
        o[l] = 2.f * cv - comp(qp[0][0], l) + 0.1f * comp(qp[1][0], l) * lap;
      }
    }
    if (c + L <= n_c) *reinterpret_cast<T*>(out + idx) = mk(o, T());
    else for (int l = 0; l < L; ++l) if (c + l < n_c) out[idx + l] = o[l];
#pragma unroll
    for (int j = 0; j < DC - 1; ++j) qc[j] = qc[j + 1];
#pragma unroll
    for (int j = 0; j < DI - 1; ++j) {
#pragma unroll
      for (int g = 0; g < 2 * G; ++g) qx[g][j] = qx[g][j + 1];
#pragma unroll
      for (int d = 0; d < 2 * R; ++d) qy[d][j] = qy[d][j + 1];
      qp[0][j] = qp[0][j + 1]; qp[1][j] = qp[1][j + 1];
    }
  }
}


// 2.5D: the current plane of u with its halo in shared memory (double-buffered: one barrier per
// plane), the o column in a register queue with one plane of lookahead; halo of the next plane
// loaded into registers one step ahead; vector loads and vector shared-memory accesses.
template <int R, int L, int BX, int BY, int PPT>
__global__ void __launch_bounds__(BX * BY) smem25(const float* __restrict__ u, const float* __restrict__ up,
    const float* __restrict__ v2, float* __restrict__ out, long long origin, int n_c, int n_m, int n_o) {
  constexpr long long S_M = 576, S_O = 576LL * (512 + 2 * R);
  typedef typename V<L>::t T;
  constexpr int G = (R + L - 1) / L;      // halo groups each side along c
  constexpr int WG = BX + 2 * G;          // tile row, in groups
  constexpr int HR = BY + 2 * R;          // tile rows
  constexpr int NH = (2 * R + BY - 1) / BY;  // halo rows per thread (upper bound)
  constexpr int PF = 1;
  constexpr int DC = 2 * R + 1 + PF;
  __shared__ T tile[2][HR][WG];
  const int tc = threadIdx.x, tm = threadIdx.y;
  const int c = (blockIdx.x * BX + tc) * L;
  const int m = blockIdx.y * BY + tm;
  const int o0 = blockIdx.z * PPT;
  const int m0 = blockIdx.y * BY;
  const int steps = min(PPT, n_o - o0);
  const bool active = c < n_c && m < n_m;
  long long idx = origin + c + m * S_M + o0 * S_O;
  auto ld = [&](const float* p, long long off) { return __ldg(reinterpret_cast<const T*>(p + off)); };
  // c halo: thread tc < G loads left group tc - G, tc >= BX - G right group
  const bool hl = tc < G, hr = tc >= BX - G;
  const long long hc_off = hl ? -(long long)G * L : (long long)G * L;
  const int hc_col = hl ? tc : tc + 2 * G;
  // m halo rows
  long long hm_off[NH]; int hm_row[NH]; bool hm_ok[NH];
#pragma unroll
  for (int k = 0; k < NH; ++k) {
    const int r = tm + k * BY;
    const int row = r < R ? r : BY + r;              // tile row (0..R-1 below, BY+R.. above)
    const int gm = m0 + row - R;                     // global m (may be -R..)
    hm_ok[k] = r < 2 * R && gm < n_m + R && c < n_c;
    hm_off[k] = (long long)(row - R - tm) * S_M;
    hm_row[k] = row;
  }
  T qc[DC], hcv, hmv[NH];
#pragma unroll
  for (int j = 0; j < DC - 1; ++j)
    if (active && (j <= 2 * R || j - 2 * R < steps)) qc[j] = ld(u, idx + (j - R) * S_O);
  if ((hl || hr) && m < n_m) hcv = ld(u, idx + hc_off);
#pragma unroll
  for (int k = 0; k < NH; ++k) if (hm_ok[k]) hmv[k] = ld(u, idx + hm_off[k]);
  for (int s = 0; s < steps; ++s, idx += S_O) {
    const int b = s & 1;
    if (active) tile[b][tm + R][tc + G] = qc[R];
    if ((hl || hr) && m < n_m) tile[b][tm + R][hc_col] = hcv;
#pragma unroll
    for (int k = 0; k < NH; ++k) if (hm_ok[k]) tile[b][hm_row[k]][tc + G] = hmv[k];
    // loads for the coming steps
    T pu, pv;
    if (active) {
      if (s + PF < steps) qc[DC - 1] = ld(u, idx + (R + PF) * S_O);
      if (R > 1) { pu = ld(up, idx); pv = ld(v2, idx); }
    }
    if (s + 1 < steps) {
      if ((hl || hr) && m < n_m) hcv = ld(u, idx + S_O + hc_off);
#pragma unroll
      for (int k = 0; k < NH; ++k) if (hm_ok[k]) hmv[k] = ld(u, idx + S_O + hm_off[k]);
    }
    __syncthreads();
    if (active) {
      T xs[2 * G + 1], ys[2 * R];
#pragma unroll
      for (int g = 0; g < 2 * G + 1; ++g) xs[g] = g == G ? qc[R] : tile[b][tm + R][tc + g];
#pragma unroll
      for (int d = 0; d < R; ++d) { ys[d] = tile[b][tm + R - 1 - d][tc + G]; ys[R + d] = tile[b][tm + R + 1 + d][tc + G]; }
      float o[L];
#pragma unroll
      for (int l = 0; l < L; ++l) {
        auto cx = [&](int dc) -> float {
          int p = l + dc;
          int g = p >= 0 ? p / L : -((-p + L - 1) / L);
          return comp(xs[G + g], p - g * L);
        };
        const float cv = comp(qc[R], l);
        if (R == 1) {
          o[l] = 0.4f * cv + 0.1f * cx(1) + 0.1f * cx(-1) + 0.1f * comp(ys[R], l) + 0.1f * comp(ys[0], l) + 0.1f * comp(qc[R + 1], l) + 0.1f * comp(qc[R - 1], l);
        } else {
          float lap = 3.f * coef(0) * cv;
#pragma unroll
          for (int d = 1; d <= R; ++d)
            lap += coef(d) * (((((cx(d) + cx(-d)) + comp(ys[R + d - 1], l)) + comp(ys[d - 1], l)) + comp(qc[R + d], l)) + comp(qc[R - d], l));
          o[l] = 2.f * cv - comp(pu, l) + 0.1f * comp(pv, l) * lap;
        }
      }
      if (c + L <= n_c) *reinterpret_cast<T*>(out + idx) = mk(o, T());
      else for (int l = 0; l < L; ++l) if (c + l < n_c) out[idx + l] = o[l];
    }
#pragma unroll
    for (int j = 0; j < DC - 1; ++j) qc[j] = qc[j + 1];
  }
}


template <int R, int L, int BX, int BY, int PPT, int PF, bool ORD, bool ALT, int FRESH>
__global__ void __launch_bounds__(BX * BY) star(const float* __restrict__ u, const float* __restrict__ up,
    const float* __restrict__ v2, float* __restrict__ out, long long origin, int n_c, int n_m, int n_o) {
  constexpr long long S_M = 576, S_O = 576LL * (512 + 2 * R);
  typedef typename V<L>::t T;
  int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
  if (ORD) {
    const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    bz = lin % gridDim.z;
    const unsigned r = lin / gridDim.z;
    bx = r % gridDim.x;
    by = r / gridDim.x;
  }
  const int c = (bx * BX + threadIdx.x) * L;
  const int m = by * BY + threadIdx.y;
  const int o0 = bz * PPT;
  if (c >= n_c || m >= n_m) return;
  const int steps = min(PPT, n_o - o0);
  const long long idx = origin + c + m * S_M + o0 * S_O;
  if (ALT && (bz & 1))
    march<R, L, PPT, PF, -1, FRESH, T>(u, up, v2, out, idx + (steps - 1) * S_O, c, n_c, steps);
  else
    march<R, L, PPT, PF, 1, FRESH, T>(u, up, v2, out, idx, c, n_c, steps);
}

__global__ void copy4(const float4* __restrict__ a, float4* __restrict__ b, long long n4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) b[i] = __ldg(a + i);
}

static const int N = 512;
struct Layout { long long SM, SO, origin, len; };
static Layout layout(int h) {
  long long lead = (32 - h % 32) % 32, pitch = (lead + N + 2 * h + 31) / 32 * 32;
  Layout l; l.SM = pitch; l.SO = pitch * (N + 2 * h); l.origin = h * l.SO + h * pitch + lead + h; l.len = l.SO * (N + 2 * h); return l;
}
static cudaEvent_t e0, e1;
static bool PROFILE = false;
template <class F> static float median_ms(F f) {
  if (PROFILE) { f(); CK(cudaDeviceSynchronize()); return 1.f; }
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 15; ++i) { CK(cudaEventRecord(e0)); f(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms); }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end()); return t[7];
}
static double copy_gbs;
static float *U, *UP, *V2, *OUT;
static std::vector<float> ref_host;

template <int R, int L, int BX, int BY, int PPT, int PF, bool ORD, bool ALT, int FRESH>
static void run(const char* name) {
  Layout lay = layout(R);
  dim3 b(BX, BY), g((N + BX * L - 1) / (BX * L), (N + BY - 1) / BY, (N + PPT - 1) / PPT);
  auto k = star<R, L, BX, BY, PPT, PF, ORD, ALT, FRESH>;
  cudaFuncAttributes a; CK(cudaFuncGetAttributes(&a, k));
  int nb; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, k, BX * BY, 0));
  CK(cudaMemset(OUT, 0xff, lay.len * 4));
  float ms = median_ms([&] { k<<<g, b>>>(U, UP, V2, OUT, lay.origin, N, N, N); });
  CK(cudaDeviceSynchronize());
  std::vector<float> h(lay.len); CK(cudaMemcpy(h.data(), OUT, lay.len * 4, cudaMemcpyDeviceToHost));
  // compare the interior with the first variant of this R (the reference)
  double maxrel = 0; bool first = ref_host.empty();
  if (PROFILE) first = false; else
  if (first) ref_host = h;
  if (!first && !PROFILE) for (long long kk = 0; kk < N; kk += 7) for (long long j = 0; j < N; ++j) for (long long i = 0; i < N; ++i) {
    long long p = lay.origin + kk * lay.SO + j * lay.SM + i; double d = fabs(h[p] - ref_host[p]) / (fabs(ref_host[p]) + 1e-3);
    if (!(d <= maxrel)) maxrel = d;  // NaN propagates
  }
  double bytes = (R == 1 ? 8.0 : 16.0) * N * (double)N * N;
  double gbs = bytes / (ms * 1e-3) / 1e9;
  printf("| %s | %d | %d | %.3f | %.0f | %.1f%% | %.1e |\n", name, a.numRegs, nb * BX * BY, ms, gbs, 100 * gbs / copy_gbs, maxrel);
}


template <int R, int L, int BX, int BY, int PPT>
static void run_smem(const char* name) {
  Layout lay = layout(R);
  dim3 b(BX, BY), g((N + BX * L - 1) / (BX * L), (N + BY - 1) / BY, (N + PPT - 1) / PPT);
  auto k = smem25<R, L, BX, BY, PPT>;
  cudaFuncAttributes a; CK(cudaFuncGetAttributes(&a, k));
  int nb; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, k, BX * BY, 0));
  CK(cudaMemset(OUT, 0xff, lay.len * 4));
  float ms = median_ms([&] { k<<<g, b>>>(U, UP, V2, OUT, lay.origin, N, N, N); });
  CK(cudaDeviceSynchronize());
  std::vector<float> h(lay.len); CK(cudaMemcpy(h.data(), OUT, lay.len * 4, cudaMemcpyDeviceToHost));
  double maxrel = 0;
  if (!PROFILE) for (long long kk = 0; kk < N; kk += 7) for (long long j = 0; j < N; ++j) for (long long i = 0; i < N; ++i) {
    long long p = lay.origin + kk * lay.SO + j * lay.SM + i; double d = fabs(h[p] - ref_host[p]) / (fabs(ref_host[p]) + 1e-3);
    if (!(d <= maxrel)) maxrel = d;
  }
  double bytes = (R == 1 ? 8.0 : 16.0) * N * (double)N * N;
  double gbs = bytes / (ms * 1e-3) / 1e9;
  printf("| %s | %d | %d | %.3f | %.0f | %.1f%% | %.1e |\n", name, a.numRegs, nb * BX * BY, ms, gbs, 100 * gbs / copy_gbs, maxrel);
}

int main() {
  PROFILE = getenv("PROFILE") != nullptr;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  Layout l4 = layout(4);
  size_t bytes = l4.len * 4;
  CK(cudaMalloc(&U, bytes)); CK(cudaMalloc(&UP, bytes)); CK(cudaMalloc(&V2, bytes)); CK(cudaMalloc(&OUT, bytes));
  std::vector<float> h(l4.len); srand(7);
  for (auto& x : h) x = rand() / (float)RAND_MAX; CK(cudaMemcpy(U, h.data(), bytes, cudaMemcpyHostToDevice));
  for (auto& x : h) x = rand() / (float)RAND_MAX; CK(cudaMemcpy(UP, h.data(), bytes, cudaMemcpyHostToDevice));
  for (auto& x : h) x = rand() / (float)RAND_MAX; CK(cudaMemcpy(V2, h.data(), bytes, cudaMemcpyHostToDevice));
  size_t cb = (size_t)N * N * N * 4;
  float cms = median_ms([&] { CK(cudaMemcpyAsync(OUT, U, cb, cudaMemcpyDeviceToDevice)); });
  copy_gbs = 2.0 * cb / (cms * 1e-3) / 1e9;
  float kms = median_ms([&] { copy4<<<132 * 16, 128>>>((const float4*)U, (float4*)OUT, cb / 16); });
  float kms2 = median_ms([&] { copy4<<<cb / 16 / 128, 128>>>((const float4*)U, (float4*)OUT, cb / 16); });
  printf("copy (cudaMemcpy D2D %zu MiB): %.0f GB/s; float4 copy kernel persistent %.1f%%, one-shot %.1f%% of it\n", cb >> 20, copy_gbs,
         100 * 2.0 * cb / (kms * 1e-3) / 1e9 / copy_gbs, 100 * 2.0 * cb / (kms2 * 1e-3) / 1e9 / copy_gbs);
  printf("| variant | regs | threads/SM | ms | GB/s | %% copy | max rel diff |\n|---|---:|---:|---:|---:|---:|---:|\n");
  // <R, L, BX, BY, PPT, PF, ORD, ALT, FRESH>
  run<1, 4, 128, 1, 16, 0, false, false, 1>("s1 t 128x1x16");
  run<1, 4, 128, 1, 32, 0, false, false, 1>("s1 t 128x1x32");
  run<1, 4, 128, 1, 64, 0, false, false, 1>("s1 t 128x1x64");
  run<1, 4, 128, 1, 16, 0, true, false, 1>("s1 t 128x1x16 ord");
  run<1, 4, 128, 1, 16, 0, false, true, 1>("s1 t 128x1x16 alt");
  run<1, 4, 128, 1, 16, 0, true, true, 1>("s1 t 128x1x16 ord alt");
  run<1, 4, 32, 4, 32, 1, false, false, 1>("s1 t 32x4x32 pf1");
  run_smem<1, 4, 32, 4, 16>("s1 smem 32x4x16");
  run_smem<1, 4, 32, 4, 32>("s1 smem 32x4x32");
  run_smem<1, 4, 32, 8, 16>("s1 smem 32x8x16");
  run_smem<1, 4, 32, 8, 32>("s1 smem 32x8x32");
  run_smem<1, 4, 64, 4, 32>("s1 smem 64x4x32");
  run_smem<1, 4, 32, 16, 32>("s1 smem 32x16x32");
  run_smem<1, 4, 64, 8, 32>("s1 smem 64x8x32");
  run_smem<1, 4, 32, 8, 64>("s1 smem 32x8x64");
  ref_host.clear();
  run<4, 2, 32, 4, 16, 0, false, false, 1>("s2 t f2 32x4x16");
  run<4, 2, 32, 4, 16, 0, false, false, 0>("s2 t f2 32x4x16 order 0");
  run<4, 2, 32, 4, 16, 0, false, false, 2>("s2 t f2 32x4x16 order 2");
  run<4, 2, 32, 4, 16, 1, false, false, 1>("s2 t f2 32x4x16 pf1");
  run<4, 4, 32, 4, 16, 0, false, false, 1>("s2 t f4 32x4x16");
  run_smem<4, 2, 32, 4, 16>("s2 smem f2 32x4x16");
  run_smem<4, 2, 32, 8, 16>("s2 smem f2 32x8x16");
  run_smem<4, 2, 32, 8, 32>("s2 smem f2 32x8x32");
  run_smem<4, 4, 32, 8, 32>("s2 smem f4 32x8x32");
  run_smem<4, 4, 32, 4, 32>("s2 smem f4 32x4x32");
  run_smem<4, 2, 64, 8, 32>("s2 smem f2 64x8x32");
  run_smem<4, 4, 32, 16, 32>("s2 smem f4 32x16x32");
  run_smem<4, 2, 32, 16, 32>("s2 smem f2 32x16x32");
  return 0;
}
