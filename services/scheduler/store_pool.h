// A fixed pool of database threads, each owning one Store (one connection per thread, as
// CONVENTIONS.md asks). Tasks run in FIFO order on whichever thread is free.
//
// Thread-safety: Submit is thread-safe. Stop() drains the queue, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "services/store/store.h"

namespace ts::scheduler {

class StorePool {
 public:
  // The task gets the thread's Store, or nullptr when the database cannot be reached.
  using Task = std::function<void(store::Store*)>;

  // nice > 0 lowers the threads' CPU priority (Linux per-thread nice): the report pool yields to
  // the lease pool when the machine is saturated.
  StorePool(store::StoreOptions opts, int threads, int queue_limit, int nice = 0);
  ~StorePool();

  // false when `queue_limit` tasks are already waiting (the caller answers RESOURCE_EXHAUSTED)
  // or the pool is stopping.
  bool Submit(Task task);
  void Stop();
  size_t queued() const;

 private:
  void Loop(int nice);

  store::StoreOptions opts_;
  size_t queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ts::scheduler
