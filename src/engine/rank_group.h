// Tensor parallelism's threads: rank 0 runs on the caller's thread and ranks 1.. each on a thread
// of their own, with their backend bound there, so that every rank enqueues its part of a step
// (NCCL calls, graph captures and replays) at the same time. One rank: no threads at all.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ops/ops.h"

namespace lite_llama {

class RankGroup {
 public:
  // backends[r] is rank r's; they must outlive the group's last run().
  explicit RankGroup(std::vector<ops::Backend*> backends);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int size() const { return int(backends_.size()); }
  // fn(r) on every rank at once; returns when all have returned and rethrows the first error.
  void run(const std::function<void(int rank)>& fn);

 private:
  void worker(int rank);

  std::vector<ops::Backend*> backends_;
  std::mutex m_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace lite_llama
