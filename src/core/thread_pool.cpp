#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include "core/error.h"
#include "core/timer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LL_PAUSE() _mm_pause()
#else
#define LL_PAUSE() ((void)0)
#endif

namespace lite_llama {

int default_thread_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

namespace {

// Binds the calling thread to the index-th CPU (round robin) of the process's affinity set.
void pin_to(int index) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) == 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[size_t(index) % cpus.size()], &one);
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, bool pin) : num_threads_(num_threads), pin_(pin) {
  LL_CHECK(num_threads >= 1 && num_threads <= 1024, "--threads must be in 1..1024, got {}",
           num_threads);
  for (int i = 1; i < num_threads_; ++i)
    threads_.emplace_back([this, i] {
      if (pin_) pin_to(i);
      worker(i);
    });
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run(const Job& job) {
  if (pin_) {
    thread_local bool pinned = false;
    if (!pinned) pin_to(0), pinned = true;
  }
  if (num_threads_ == 1) {
    job(0, 1);
    return;
  }
  job_ = &job;
  closed_.store(false, std::memory_order_seq_cst);
  {
    // The lock orders the generation bump against a worker that is about to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
  job(0, num_threads_);
  // The caller has claimed the last piece of work: close the job, then wait only for workers
  // that entered it (seq_cst: a worker either is counted here or sees the job closed).
  closed_.store(true, std::memory_order_seq_cst);
  // Yield after a short spin: with more runnable threads than cores (a busy machine) a worker
  // may be descheduled, and pure spinning would then burn the core it needs.
  for (int iter = 0; active_.load(std::memory_order_seq_cst) != 0; ++iter) {
    if (iter < 2048)
      LL_PAUSE();
    else
      sched_yield();
  }
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while: consecutive jobs of a forward pass arrive microseconds apart.
    double spin_until = now_ms() + 2.0;
    uint64_t g;
    int iter = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++iter < 2048) {
        LL_PAUSE();
      } else {
        sched_yield();
        if (iter % 16 == 0 && now_ms() > spin_until) break;
      }
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      sleepers_.fetch_sub(1);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_) return;
    active_.fetch_add(1, std::memory_order_seq_cst);
    // A job that is over (or already replaced by the next) is skipped: its caller may be gone.
    if (!closed_.load(std::memory_order_seq_cst) && generation_.load(std::memory_order_seq_cst) == g)
      (*job_)(index, num_threads_);
    active_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace lite_llama
