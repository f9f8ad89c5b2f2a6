#include "workers/refs/format.h"

#include <cstdint>

namespace ts::refs {

StatusOr<BundleHeader> ParseBundleHeader(std::string_view bytes) {
  if (bytes.size() < 8) return InvalidArgumentError("bundle: truncated (shorter than 8 bytes)");
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  if (len > bytes.size() - 8) {
    return InvalidArgumentError("bundle: truncated (a header of " + std::to_string(len) +
                                " bytes in a file of " + std::to_string(bytes.size()) + ")");
  }
  const nlohmann::json header =
      nlohmann::json::parse(bytes.substr(8, len), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return InvalidArgumentError("bundle: header is not a JSON object");
  auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object() || !meta->contains(kMetadataEntry) ||
      !(*meta)[kMetadataEntry].is_string()) {
    return InvalidArgumentError(std::string("bundle: no __metadata__.") + kMetadataEntry +
                                " (not a reference bundle)");
  }
  BundleHeader out;
  out.metadata = nlohmann::json::parse((*meta)[kMetadataEntry].get<std::string>(), nullptr,
                                       /*allow_exceptions=*/false);
  if (!out.metadata.is_object()) {
    return InvalidArgumentError(std::string("bundle: ") + kMetadataEntry + ": not a JSON object");
  }
  auto format = out.metadata.find("format");
  if (format == out.metadata.end() || !format->is_number_integer() ||
      format->get<int>() < kOldestFormatVersion || format->get<int>() > kFormatVersion) {
    return InvalidArgumentError("bundle: format " +
                                (format == out.metadata.end() ? "missing" : format->dump()) +
                                ", this build reads " + std::to_string(kOldestFormatVersion) +
                                " to " + std::to_string(kFormatVersion));
  }
  auto key = out.metadata.find("key");
  if (key == out.metadata.end()) return InvalidArgumentError("bundle: key: missing");
  TS_ASSIGN_OR_RETURN(out.key, KeyFromJson(*key));
  return out;
}

}  // namespace ts::refs
