// The query benchmark's readers: N threads, each with its own gRPC channel to the scheduler,
// looping over the Query RPC mix (GetSummary by task and by arch, GetModel of a random model's
// last 30 sweeps, OpDemand in eager and compile, CompareSweeps of two consecutive sweeps, Gate
// of a sweep against the one before with realistic rules, and the first 1000-row page of
// Scheduler.ListResults, what release tooling reads today) until stopped, timing each call on
// the client (channel to answer, response parsed).
//
// Every answer is also checked for what the filled database implies (a summary counts the
// sweep's models, a history has the model's sweeps, a comparison and a gate name their
// sweeps); an answer that fails a check is counted as `wrong`, with the first reason kept.
//
// Thread-safety: Start/Stop from one thread; the readers share only the results (mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/query_records.h"

namespace ts::bench {

struct ReaderWorld {
  std::string target;            // host:port of the scheduler
  std::vector<int64_t> sweeps;   // the fill's done sweeps, oldest first (at least 2)
  int64_t models_per_sweep = 0;  // every fill sweep records the whole catalog
  const std::vector<CatalogEntry>* catalog = nullptr;
  std::vector<std::string> gate_tasks;    // min_by_task keys (the largest tasks)
  std::vector<std::string> gate_classes;  // min_by_class keys
  std::vector<std::string> must_pass;     // models that pass every mode in every fill sweep
  uint64_t seed = 1;
  // Each reader waits think_ms x U(0.5, 1.5) between calls (0: back to back, a closed loop
  // that takes every CPU it can).
  int think_ms = 0;
};

struct RpcStats {
  std::vector<double> ms;  // answered OK, in call order
  int64_t errors = 0;      // non-OK status
  int64_t wrong = 0;       // OK but failed a check
  std::string first_error;
  double P(double p) const;  // percentile of ms (0 when none)
  double Max() const;
};

class Readers {
 public:
  Readers(ReaderWorld world, int threads) : world_(std::move(world)), threads_(threads) {}
  ~Readers() { Stop(); }
  // Clears the statistics and starts the threads.
  void Start();
  // Stops and joins; returns the statistics per RPC name since Start.
  std::map<std::string, RpcStats> Stop();

 private:
  void Loop(int index);
  void Record(const std::string& rpc, double ms, const std::string& error, bool wrong);

  ReaderWorld world_;
  int threads_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> running_;
  std::mutex mu_;
  std::map<std::string, RpcStats> stats_;
};

}  // namespace ts::bench
