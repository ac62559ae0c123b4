// L2 sectors of 16-byte cp.async pieces of token-major K rows, by shared-memory destination layout:
// the decode kernel pads each smem row by 16 bytes (ld = D + 8), so a row's 128-byte pieces land
// at smem addresses that cross 128-byte lines. Does LDGSTS then split requests and fetch sectors twice?
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
// PIECE: bytes of one head's row (128 = D 64, 256 = D 128); SS: smem row stride in bytes;
// MODE 0 cp.async imm, 1 cp.async src-size register (the kernel's zfill form), 2 ld.global.cg, 3 cp.async swizzled.
template <int PIECE, int SS, int MODE>
__global__ void __launch_bounds__(128) readk(const uint8_t* __restrict__ buf, int rows_per_block, int stride, unsigned* sink) {
  __shared__ __align__(128) uint8_t tile[2][64 * SS];
  constexpr int kChunks = PIECE / 16;
  const int piece = blockIdx.y;
  const size_t r0 = size_t(blockIdx.x) * rows_per_block;
  unsigned acc = 0;
  for (int t = 0; t < rows_per_block / 64; ++t) {
    for (int i = threadIdx.x; i < 64 * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      const uint8_t* src = buf + (r0 + t * 64 + r) * size_t(stride) + piece * PIECE + c * 16;
      const int cs = MODE == 3 ? ((c & ~7) | ((c ^ r) & 7)) : c;
      const uint32_t dst = uint32_t(__cvta_generic_to_shared(&tile[t & 1][r * SS + cs * 16]));
      if (MODE == 0 || MODE == 3) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
      } else if (MODE == 1) {
        const bool ok = r0 + t * 64 + r < (size_t(1) << 40);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
      } else {
        uint4 v;
        asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src));
        acc ^= v.x ^ v.w;
      }
    }
    if (MODE != 2) {
      asm volatile("cp.async.commit_group;\ncp.async.wait_group 1;\n" ::);
      __syncthreads();
      acc ^= tile[(t + 1) & 1][threadIdx.x];
    }
  }
  if (MODE != 2) asm volatile("cp.async.wait_group 0;\n" ::);
  if (acc == 0x12345678u) sink[0] = acc;
}
template <int PIECE, int SS, int MODE>
void run(const char* name, uint8_t* buf, size_t bytes, unsigned* sink) {
  const int stride = PIECE * 8, pieces = 8;  // 8 KV heads a token
  const size_t rows = bytes / stride;
  const int chunks = 1056 / pieces;
  const int rpb = int(rows / chunks) / 64 * 64;
  dim3 grid(chunks, pieces);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  readk<PIECE, SS, MODE><<<grid, 128>>>(buf, rpb, stride, sink);
  cudaDeviceSynchronize();
  cudaEventRecord(a);
  for (int rep = 0; rep < 5; ++rep) readk<PIECE, SS, MODE><<<grid, 128>>>(buf, rpb, stride, sink);
  cudaEventRecord(b); cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  const double rd = double(chunks) * pieces * rpb * PIECE;
  printf("%-44s %.1f GB/s read (%s)\n", name, rd * 5 / ms / 1e6, cudaGetErrorString(cudaGetLastError()));
}
int main() {
  const size_t bytes = size_t(1) << 30;
  uint8_t* buf; unsigned* sink;
  cudaMalloc(&buf, bytes); cudaMalloc(&sink, 4); cudaMemset(buf, 1, bytes);
  // copy reference
  uint8_t* dst; cudaMalloc(&dst, bytes / 2);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b); float ms;
  cudaMemcpy(dst, buf, bytes / 2, cudaMemcpyDeviceToDevice);
  cudaEventRecord(a); for (int i = 0; i < 5; ++i) cudaMemcpy(dst, buf, bytes / 2, cudaMemcpyDeviceToDevice);
  cudaEventRecord(b); cudaEventSynchronize(b); cudaEventElapsedTime(&ms, a, b);
  printf("%-44s %.1f GB/s (read + write)\n", "device copy 512 MiB", 2.0 * (bytes / 2) * 5 / ms / 1e6);
  run<128, 128, 0>("v0 D64 cp.async smem 128B rows", buf, bytes, sink);
  run<128, 144, 0>("v1 D64 cp.async smem 144B rows (pad)", buf, bytes, sink);
  run<128, 144, 1>("v2 D64 cp.async zfill smem 144B (kernel)", buf, bytes, sink);
  run<128, 128, 3>("v3 D64 cp.async swizzled 128B rows", buf, bytes, sink);
  run<128, 128, 2>("v4 D64 ld.global.cg", buf, bytes, sink);
  run<256, 272, 1>("v5 D128 cp.async zfill smem 272B (kernel)", buf, bytes, sink);
  run<256, 256, 3>("v6 D128 cp.async swizzled 256B rows", buf, bytes, sink);
  run<256, 256, 0>("v7 D128 cp.async smem 256B rows", buf, bytes, sink);
  return 0;
}
