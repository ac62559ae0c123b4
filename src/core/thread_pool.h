// A fork-join pool for the CPU kernels. Workers spin briefly between jobs (a decode step runs
// hundreds of tiny parallel loops) and then sleep, so an idle engine costs no CPU. Work is
// claimed, not assigned: a job returns once its work is done even if a worker has not woken up
// yet (on a machine busy with other processes a descheduled worker would otherwise hold every
// step for a time slice).
#pragma once
#include <algorithm>
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
  // fn(thread_index, num_threads). The caller runs index 0; a worker may join late or not at
  // all (it skips a job that is over), so jobs must claim their work dynamically (an atomic
  // counter) rather than by thread index.
  using Job = std::function<void(int, int)>;

  // pin: each thread is bound to one CPU of the process's affinity set (the caller that runs
  // index 0 at its first job, workers as they start), round robin.
  explicit ThreadPool(int num_threads, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  void run(const Job& job);

  // Splits [0, n) into up to 4 contiguous chunks per thread, claimed by whichever thread is
  // free; chunk boundaries are multiples of `align`.
  template <typename F>
  void parallel_for(int64_t n, F&& fn, int64_t align = 1) {
    if (n <= 0) return;
    const int64_t units = (n + align - 1) / align;
    if (units == 1 || num_threads_ == 1) {  // one chunk: no fork-join (a decode step has many)
      fn(int64_t(0), n);
      return;
    }
    const int64_t chunks = std::min<int64_t>(units, 4 * int64_t(num_threads_));
    std::atomic<int64_t> next{0};
    run([&](int, int) {
      for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        const int64_t b = units * c / chunks * align, e = std::min(n, units * (c + 1) / chunks * align);
        if (b < e) fn(b, e);
      }
    });
  }

 private:
  void worker(int index);

  int num_threads_;
  bool pin_ = false;
  std::vector<std::thread> threads_;
  const Job* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};       // workers inside the current job
  std::atomic<bool> closed_{false};  // the current job's work is done: late workers skip it
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

// Number of hardware threads usable by this process.
int default_thread_count();

}  // namespace lite_llama
