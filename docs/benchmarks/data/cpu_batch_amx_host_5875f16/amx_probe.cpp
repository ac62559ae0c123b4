#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
struct alignas(64) TileCfg { uint8_t palette, start; uint8_t r0[14]; uint16_t colsb[16]; uint8_t rows[16]; };
int main() {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) { std::puts("no AMX permission"); return 1; }
  TileCfg c{}; c.palette = 1;
  for (int i = 0; i < 8; ++i) { c.rows[i] = 16; c.colsb[i] = 64; }
  _tile_loadconfig(&c);
  alignas(64) static int8_t A[16 * 64], B[16 * 64]; alignas(64) static int32_t C[16 * 16];
  for (int i = 0; i < 1024; ++i) A[i] = int8_t(i * 7), B[i] = int8_t(i * 3);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, A, 64); _tile_loadd(5, A, 64); _tile_loadd(6, B, 64); _tile_loadd(7, B, 64);
  const long n = 20000000;
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    _tile_dpbssd(0, 4, 6); _tile_dpbssd(1, 4, 7); _tile_dpbssd(2, 5, 6); _tile_dpbssd(3, 5, 7);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  _tile_stored(0, C, 64);
  std::printf("AMX int8: %.1f GMAC/s on one core (C[0]=%d)\n", 4.0 * n * 16 * 16 * 64 / s / 1e9, C[0]);
  _tile_release();
}
