#include "workers/refs/blob.h"

#include <zlib.h>

#include <cstdint>

namespace ts::refs {
namespace {

constexpr std::string_view kDeflated = "TSZ1";
constexpr size_t kDeflatedHead = 4 + 8;

}  // namespace

std::string BlobOf(std::string_view bytes) {
  uLongf size = compressBound(static_cast<uLong>(bytes.size()));
  std::string out(kDeflatedHead + size, '\0');
  out.replace(0, 4, kDeflated);
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<char>((bytes.size() >> (8 * i)) & 0xff);
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data() + kDeflatedHead), &size,
                           reinterpret_cast<const Bytef*>(bytes.data()),
                           static_cast<uLong>(bytes.size()), Z_BEST_SPEED);
  if (rc != Z_OK || kDeflatedHead + size > bytes.size() * 97 / 100) return std::string(bytes);
  out.resize(kDeflatedHead + size);
  return out;
}

StatusOr<std::string> BundleOf(std::string blob) {
  if (blob.compare(0, kDeflated.size(), kDeflated) != 0) return blob;
  if (blob.size() < kDeflatedHead) {
    return InvalidArgumentError("deflated, but cut short (damaged or truncated)");
  }
  uint64_t want = 0;
  for (int i = 0; i < 8; ++i) {
    want |= static_cast<uint64_t>(static_cast<uint8_t>(blob[4 + i])) << (8 * i);
  }
  // A bundle is a few MiB; a stated size beyond what deflate can reach is damage, not a size.
  if (want > (blob.size() - kDeflatedHead) * 1032 + 64 || want > (uint64_t{1} << 34)) {
    return InvalidArgumentError("deflated, stating " + std::to_string(want) +
                                " bytes (damaged or truncated)");
  }
  std::string out(static_cast<size_t>(want), '\0');
  uLongf got = static_cast<uLongf>(want);
  const int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &got,
                            reinterpret_cast<const Bytef*>(blob.data() + kDeflatedHead),
                            static_cast<uLong>(blob.size() - kDeflatedHead));
  if (rc != Z_OK || got != want) {
    return InvalidArgumentError("deflated, but does not inflate: zlib " + std::to_string(rc) +
                                " (damaged or truncated)");
  }
  return out;
}

}  // namespace ts::refs
