// ThreadPool: parallel_for covers every index once whatever the chunking, jobs return only when
// their work is done, and an idle pool sleeps (a server waiting for requests uses no CPU).
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

using namespace lite_llama;

namespace {

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

}  // namespace

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 16, 17, 100, 1000})
      for (int64_t align : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % align, 0) << "chunk start not aligned";
          for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        }, align);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n << " align " << align << " i " << i;
      }
  }
}

// Many short jobs back to back (as a decode step issues them), each checked complete when run
// returns: a worker that joins late must neither miss work nor touch a finished job.
TEST(ThreadPool, BackToBackJobsCompleteBeforeReturning) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 20000; ++rep) {
    const int64_t n = 1 + rep % 37;
    std::vector<int> v(static_cast<size_t>(n), 0);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[size_t(i)] += 1;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[size_t(i)], 1) << "rep " << rep << " i " << i;
  }
}

TEST(ThreadPool, IdlePoolUsesNoCpu) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, [&](int64_t b, int64_t e) { sum += e - b; });
  ASSERT_EQ(sum.load(), 1000);
  // Workers spin for 2 ms after a job, then sleep: give them 100 ms to settle, then 300 ms of
  // idleness may cost a few ms of CPU (wake-ups), never the 1200 ms of four spinning threads.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double c0 = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(process_cpu_ms() - c0, 30.0);
}

// CpuTuning::pin_threads: every thread of a pinned pool, the caller included, runs on exactly one
// CPU of the process's set, and the pool still covers every index once. The caller runs in a
// thread of its own so that the test process stays unpinned.
TEST(ThreadPool, PinnedThreadsRunOnOneCpuEach) {
  std::thread([] {
    ThreadPool pool(3, true);
    std::vector<std::atomic<int>> hits(100);
    std::atomic<int> unpinned{0};
    pool.run([&](int, int) {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) unpinned++;
    });
    pool.parallel_for(100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    });
    EXPECT_EQ(unpinned.load(), 0);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }).join();
}
