#include "engine/rank_group.h"

#include <chrono>

namespace lite_llama {
namespace {

// Workers poll this long after a task before they sleep: consecutive steps come within
// microseconds, and a condition-variable wake-up would add its latency to every step.
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

RankGroup::RankGroup(std::vector<ops::Backend*> backends) : backends_(std::move(backends)) {
  for (int r = 1; r < size(); ++r) threads_.emplace_back([this, r] { worker(r); });
}

RankGroup::~RankGroup() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankGroup::run(const std::function<void(int)>& fn) {
  if (size() == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(m_);
    task_ = &fn;
    error_ = nullptr;
    pending_.store(size() - 1);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  std::exception_ptr mine;
  try {
    backends_[0]->bind_thread();
    fn(0);
  } catch (...) {
    mine = std::current_exception();
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (pending_.load() > 0 && std::chrono::steady_clock::now() - t0 < kSpin) std::this_thread::yield();
  std::unique_lock<std::mutex> lk(m_);
  done_.wait(lk, [&] { return pending_.load() == 0; });
  task_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

void RankGroup::worker(int rank) {
  uint64_t seen = 0;
  bool bound = false;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    while (generation_.load() == seen && std::chrono::steady_clock::now() - t0 < kSpin) std::this_thread::yield();
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock<std::mutex> lk(m_);
      wake_.wait(lk, [&] { return generation_.load() != seen; });
      seen = generation_.load();
      if (stop_) return;
      task = task_;
    }
    try {
      if (!bound) backends_[size_t(rank)]->bind_thread(), bound = true;
      (*task)(rank);
    } catch (...) {
      std::lock_guard<std::mutex> lk(m_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lk(m_);
      done_.notify_all();
    }
  }
}

}  // namespace lite_llama
