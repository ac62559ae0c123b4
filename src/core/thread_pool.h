// A fork-join pool for the CPU kernels. Workers spin briefly between jobs (a decode step runs
// hundreds of tiny parallel loops) and then sleep, so an idle engine costs no CPU.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lite_llama {

class ThreadPool {
 public:
  // fn(thread_index, num_threads); the caller runs index 0.
  using Job = std::function<void(int, int)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  void run(const Job& job);

  // Splits [0, n) into contiguous chunks, one per thread; chunk boundaries are multiples of `align`.
  template <typename F>
  void parallel_for(int64_t n, F&& fn, int64_t align = 1) {
    if (n <= 0) return;
    run([&](int t, int nt) {
      int64_t units = (n + align - 1) / align;
      int64_t b = units * t / nt * align, e = units * (t + 1) / nt * align;
      if (e > n) e = n;
      if (b < e) fn(b, e);
    });
  }

 private:
  void worker(int index);

  int num_threads_;
  std::vector<std::thread> threads_;
  const Job* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// Number of hardware threads usable by this process.
int default_thread_count();

}  // namespace lite_llama
