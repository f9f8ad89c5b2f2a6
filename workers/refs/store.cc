#include "workers/refs/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "workers/refs/blob.h"
#include "workers/refs/format.h"

namespace ts::refs {
namespace {

namespace fs = std::filesystem;

std::string Errno(const std::string& what) { return what + " (" + std::strerror(errno) + ")"; }

// The entry file's content.
std::string EntryText(const BundleKey& key, const std::string& content, int64_t size) {
  return nlohmann::json{{"content", content}, {"size", size}, {"key", KeyToJson(key)}}.dump() +
         "\n";
}

StatusOr<Entry> ParseEntry(const fs::path& path) {
  TS_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path.string()));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string() ||
      !IsDigest(j["content"].get<std::string>()) || !j.contains("size") ||
      !j["size"].is_number_integer() || !j.contains("key")) {
    return InvalidArgumentError(path.string() + ": not a key entry");
  }
  Entry e;
  TS_ASSIGN_OR_RETURN(e.key, KeyFromJson(j["key"]));
  e.key_digest = KeyDigest(e.key);
  e.run_digest = RunDigest(e.key);
  e.content_digest = j["content"].get<std::string>();
  e.size = j["size"].get<int64_t>();
  if (path.filename() != e.key_digest) {
    return InvalidArgumentError(path.string() + ": holds the key " + e.key_digest);
  }
  return e;
}

}  // namespace

StatusOr<std::string> ReadFileBytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    return InternalError(Errno(path + ": cannot open"));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return InternalError(Errno(path + ": cannot stat"));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t off = 0;
  while (off < out.size()) {
    const ssize_t n = ::read(fd, out.data() + off, out.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(off);  // a file that shrank under us reads short: the digest check refuses it
  return out;
}

StatusOr<DirStore> DirStore::Open(const std::string& root, AfterWrite after_write) {
  std::error_code ec;
  for (const char* sub : {"blobs", "keys", "tmp"}) {
    fs::create_directories(fs::path(root) / sub, ec);
    if (ec) return InternalError(root + "/" + sub + ": " + ec.message());
  }
  return DirStore(root, std::move(after_write));
}

std::string DirStore::BlobPath(const std::string& digest) const {
  return (fs::path(root_) / "blobs" / digest.substr(0, 2) / digest).string();
}

std::string DirStore::KeyPath(const std::string& run_digest, const std::string& key_digest) const {
  return (fs::path(root_) / "keys" / run_digest.substr(0, 2) / run_digest / key_digest).string();
}

Status DirStore::WriteAtomically(const std::string& path, std::string_view bytes) const {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return InternalError(fs::path(path).parent_path().string() + ": " + ec.message());
  std::string tmp = (fs::path(root_) / "tmp" / "XXXXXX.part").string();
  const int fd = ::mkstemps(tmp.data(), 5);
  if (fd < 0) return InternalError(Errno(tmp + ": cannot create"));
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = InternalError(Errno(tmp + ": write failed"));
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    off += static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (after_write_) after_write_(tmp);
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const Status s = InternalError(Errno(path + ": cannot store"));
    ::unlink(tmp.c_str());
    return s;
  }
  return OkStatus();
}

StatusOr<std::string> DirStore::Put(const BundleKey& key, std::string_view bytes) const {
  const std::string digest = Sha256Hex(bytes);
  // Same bytes, same name: a blob already there is this bundle unless it was damaged since.
  if (!HasBlob(digest) || !ReadBlob(digest).ok()) {
    TS_RETURN_IF_ERROR(WriteAtomically(BlobPath(digest), BlobOf(bytes)));
  }
  TS_RETURN_IF_ERROR(WriteAtomically(KeyPath(RunDigest(key), KeyDigest(key)),
                                     EntryText(key, digest, static_cast<int64_t>(bytes.size()))));
  return digest;
}

StatusOr<Entry> DirStore::Import(std::string_view bytes) const {
  TS_ASSIGN_OR_RETURN(BundleHeader header, ParseBundleHeader(bytes));
  TS_ASSIGN_OR_RETURN(std::string digest, Put(header.key, bytes));
  Entry e;
  e.key = header.key;
  e.key_digest = KeyDigest(e.key);
  e.run_digest = RunDigest(e.key);
  e.content_digest = digest;
  e.size = static_cast<int64_t>(bytes.size());
  return e;
}

bool DirStore::HasBlob(const std::string& content_digest) const {
  std::error_code ec;
  return IsDigest(content_digest) && fs::exists(BlobPath(content_digest), ec);
}

StatusOr<std::string> DirStore::ReadBlob(const std::string& digest) const {
  if (!IsDigest(digest)) return InvalidArgumentError("'" + digest + "' is not a SHA-256 digest");
  auto file = ReadFileBytes(BlobPath(digest));
  auto bytes = file.ok() ? BundleOf(std::move(*file)) : file;
  if (!bytes.ok()) {
    return Status(StatusCode::kDataLoss, "bundle " + digest + ": " + bytes.status().message());
  }
  const std::string actual = Sha256Hex(*bytes);
  if (actual != digest) {
    return Status(StatusCode::kDataLoss, "bundle " + digest + ": its " +
                                             std::to_string(bytes->size()) + " bytes hash to " +
                                             actual.substr(0, 12) + "... (damaged or truncated)");
  }
  return std::move(*bytes);
}

std::string DirStore::ContentOf(const BundleKey& key) const {
  auto entry = ParseEntry(KeyPath(RunDigest(key), KeyDigest(key)));
  return entry.ok() ? entry->content_digest : "";
}

StatusOr<StoredBundle> DirStore::Get(const BundleKey& key) const {
  const std::string path = KeyPath(RunDigest(key), KeyDigest(key));
  auto entry = ParseEntry(path);
  if (!entry.ok()) {
    if (entry.status().code() == StatusCode::kNotFound) return entry.status();
    return Status(StatusCode::kDataLoss, entry.status().message());
  }
  StoredBundle out;
  out.content_digest = entry->content_digest;
  TS_ASSIGN_OR_RETURN(out.bytes, ReadBlob(entry->content_digest));
  return out;
}

std::vector<Entry> DirStore::ListUnder(const std::string& dir) const {
  std::vector<Entry> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || !IsDigest(it->path().filename().string())) continue;
    auto e = ParseEntry(it->path());
    if (e.ok()) out.push_back(std::move(*e));
  }
  return out;
}

std::vector<Entry> DirStore::ListRun(const std::string& run_digest) const {
  if (!IsDigest(run_digest)) return {};
  return ListUnder((fs::path(root_) / "keys" / run_digest.substr(0, 2) / run_digest).string());
}

std::vector<Entry> DirStore::List() const { return ListUnder((fs::path(root_) / "keys").string()); }

StoreStats DirStore::Stats() const {
  StoreStats s;
  s.keys = static_cast<int64_t>(List().size());
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(fs::path(root_) / "blobs", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    ++s.blobs;
    s.blob_bytes += static_cast<int64_t>(it->file_size(ec));
  }
  for (const auto& f : fs::directory_iterator(fs::path(root_) / "tmp", ec)) {
    if (f.is_regular_file(ec)) ++s.partial_files;
  }
  return s;
}

PruneResult DirStore::Prune(const std::function<bool(const Entry&)>& keep,
                            double partial_age_s) const {
  PruneResult r;
  std::set<std::string> live;
  std::error_code ec;
  for (const Entry& e : List()) {
    if (keep(e)) {
      live.insert(e.content_digest);
      continue;
    }
    if (fs::remove(KeyPath(e.run_digest, e.key_digest), ec)) ++r.keys_removed;
  }
  std::vector<std::pair<fs::path, int64_t>> dead;  // removed after the walk, not during it
  for (auto it = fs::recursive_directory_iterator(fs::path(root_) / "blobs", ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || live.count(it->path().filename().string())) continue;
    dead.emplace_back(it->path(), static_cast<int64_t>(it->file_size(ec)));
  }
  for (const auto& [path, size] : dead) {
    if (!fs::remove(path, ec)) continue;
    ++r.blobs_removed;
    r.bytes_freed += size;
  }
  const auto now = fs::file_time_type::clock::now();
  for (const auto& f : fs::directory_iterator(fs::path(root_) / "tmp", ec)) {
    const auto age = std::chrono::duration<double>(now - f.last_write_time(ec)).count();
    if (age >= partial_age_s && fs::remove(f.path(), ec)) ++r.partial_files_removed;
  }
  return r;
}

}  // namespace ts::refs
