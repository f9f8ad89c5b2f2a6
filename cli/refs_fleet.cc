// `touchstone refs ... --scheduler HOST:PORT --token-file F`: a fleet's reference bundles, held
// by the scheduler's PostgreSQL and reached through its RPCs (scheduler.proto, "Reference
// bundles"). The admin token for prune, import and export (they act as a worker would); the
// reader token will do for stats.
#include "cli/refs_fleet.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/client.h"
#include "cli/usage.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
#include "workers/refs/format.h"
#include "workers/refs/key.h"
#include "workers/refs/store.h"
#include "workers/refs/zoo_version.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;

constexpr size_t kChunk = 1 << 20;

std::string Size(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024));
  return buf;
}

int Stats(const Connection& c, pb::Scheduler::Stub& stub) {
  pb::ReferenceStatsResponse r;
  grpc::Status st = stub.ReferenceStats(c.Context().get(), pb::ReferenceStatsRequest(), &r);
  if (!st.ok()) return RpcFailed("ReferenceStats", st);
  std::printf(
      "%lld bundles, %s (%s in the scheduler's database, deflated where that saves; %lld "
      "keys)\n",
      static_cast<long long>(r.bundles()), Size(r.bytes()).c_str(), Size(r.stored_bytes()).c_str(),
      static_cast<long long>(r.keys()));
  if (r.sweep_id() == 0) {
    std::printf("no sweep recorded a model yet\n");
    return 0;
  }
  const double rate = r.models() > 0 ? 100.0 * static_cast<double>(r.stored()) / r.models() : 0;
  std::printf(
      "last sweep %lld: %lld of %lld models from stored bundles (%.1f%% hit rate); %lld "
      "computed, %lld completed, %lld fresh; %lld refused a damaged or foreign bundle\n",
      static_cast<long long>(r.sweep_id()), static_cast<long long>(r.stored()),
      static_cast<long long>(r.models()), rate, static_cast<long long>(r.computed()),
      static_cast<long long>(r.completed()), static_cast<long long>(r.fresh()),
      static_cast<long long>(r.refused()));
  if (r.modes_compared() > 0) {
    std::printf(
        "%lld modes judged against references from elsewhere too; %lld with the "
        "reference in question\n",
        static_cast<long long>(r.modes_compared()), static_cast<long long>(r.modes_in_question()));
  }
  return 0;
}

int Prune(const Connection& c, pb::Scheduler::Stub& stub) {
  pb::PruneReferencesRequest req;
  req.set_zoo_version(refs::ZooVersion());
  req.set_torch_version(refs::TorchVersion());
  pb::PruneReferencesResponse r;
  grpc::Status st = stub.PruneReferences(c.Context(600).get(), req, &r);
  if (!st.ok()) return RpcFailed("PruneReferences", st);
  std::printf("pruned %lld keys and %lld bundles (%s) of builds other than zoo %s, torch %s\n",
              static_cast<long long>(r.keys_removed()), static_cast<long long>(r.bundles_removed()),
              Size(r.bytes_freed()).c_str(), refs::ZooVersion(), refs::TorchVersion());
  return 0;
}

// Each file as its own stream: a file refused is named, the others still go.
int Import(const Connection& c, pb::Scheduler::Stub& stub, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Usage("import: " + dir + ": not a folder");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int64_t stored = 0, duplicates = 0, failed = 0;
  for (const auto& p : files) {
    auto bytes = refs::ReadFileBytes(p.string());
    Status checked = bytes.ok() ? refs::ParseBundleHeader(*bytes).status() : bytes.status();
    if (!checked.ok()) {
      ++failed;
      std::fprintf(stderr, "touchstone refs: %s: %s (skipped)\n", p.string().c_str(),
                   checked.message().c_str());
      continue;
    }
    pb::UploadReferencesResponse r;
    auto ctx = c.Context(600);
    auto w = stub.UploadReferences(ctx.get(), &r);
    const std::string digest = refs::Sha256Hex(*bytes);
    size_t off = 0;
    do {
      pb::ReferenceChunk chunk;
      chunk.set_content_digest(digest);
      const size_t n = std::min(kChunk, bytes->size() - off);
      chunk.set_data(bytes->substr(off, n));
      off += n;
      chunk.set_last(off == bytes->size());
      if (!w->Write(chunk)) break;
    } while (off < bytes->size());
    w->WritesDone();
    grpc::Status st = w->Finish();
    if (!st.ok()) {
      ++failed;
      std::fprintf(stderr, "touchstone refs: %s: %s (skipped)\n", p.string().c_str(),
                   st.error_message().c_str());
      continue;
    }
    stored += r.stored();
    duplicates += r.duplicates();
  }
  std::printf("imported %lld bundle(s) from %s (%lld already stored); %lld file(s) refused\n",
              static_cast<long long>(stored + duplicates), dir.c_str(),
              static_cast<long long>(duplicates), static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}

int Export(const Connection& c, pb::Scheduler::Stub& stub, int64_t sweep, const std::string& dir) {
  pb::ListReferencesRequest list;
  list.set_sweep_id(sweep);
  pb::ListReferencesResponse listed;
  grpc::Status st = stub.ListReferences(c.Context().get(), list, &listed);
  if (!st.ok()) return RpcFailed("ListReferences", st);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Usage("export: " + dir + ": " + ec.message());
  pb::FetchReferencesRequest fetch;
  int64_t missing = 0;
  for (const auto& e : listed.entries()) {
    if (e.size() == 0) {  // the sweep names a bundle this database does not hold
      ++missing;
      continue;
    }
    fetch.add_content_digests(e.content_digest());
  }
  int64_t written = 0;
  if (fetch.content_digests_size() > 0) {
    auto ctx = c.Context(600);
    auto r = stub.FetchReferences(ctx.get(), fetch);
    pb::ReferenceChunk chunk;
    std::string body;
    while (r->Read(&chunk)) {
      body += chunk.data();
      if (!chunk.last()) continue;
      if (refs::Sha256Hex(body) != chunk.content_digest()) {
        return Fail("bundle " + chunk.content_digest() + " arrived damaged");
      }
      std::ofstream(fs::path(dir) / (chunk.content_digest() + ".safetensors"), std::ios::binary)
          .write(body.data(), static_cast<std::streamsize>(body.size()));
      ++written;
      body.clear();
    }
    st = r->Finish();
    if (!st.ok()) return RpcFailed("FetchReferences", st);
  }
  std::printf("exported %lld bundle(s) of sweep %lld to %s; %lld missing from the store\n",
              static_cast<long long>(written), static_cast<long long>(sweep), dir.c_str(),
              static_cast<long long>(missing));
  return missing == 0 ? 0 : 1;
}

}  // namespace

int RefsFleetCommand(ClientFlags client, const std::string& sub, const std::string& dir,
                     int64_t sweep) {
  client.admin = sub != "stats";
  auto conn = Connect(client);
  if (!conn.ok()) return Usage(std::string(conn.status().message()));
  auto stub = pb::Scheduler::NewStub(conn->channel);
  if (sub == "stats") return Stats(*conn, *stub);
  if (sub == "prune") return Prune(*conn, *stub);
  if (sub == "import") return Import(*conn, *stub, dir);
  return Export(*conn, *stub, sweep, dir);
}

}  // namespace ts::cli
