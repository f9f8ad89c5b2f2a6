#include "services/scheduler/store_pool.h"

#include <sys/resource.h>
#include <unistd.h>

namespace ts::scheduler {

StorePool::StorePool(store::StoreOptions opts, int threads, int queue_limit, int nice)
    : opts_(std::move(opts)), queue_limit_(static_cast<size_t>(std::max(1, queue_limit))) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this, nice] { Loop(nice); });
  }
}

StorePool::~StorePool() { Stop(); }

bool StorePool::Submit(Task task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ || tasks_.size() >= queue_limit_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

size_t StorePool::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return tasks_.size();
}

void StorePool::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void StorePool::Loop(int nice) {
  if (nice > 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
  std::unique_ptr<store::Store> store;
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    if (!store) {
      auto s = store::Store::Connect(opts_);
      if (s.ok()) store = std::move(*s);
    }
    task(store.get());
  }
}

}  // namespace ts::scheduler
