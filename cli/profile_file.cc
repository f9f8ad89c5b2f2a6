#include "cli/profile_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/usage.h"

namespace ts::cli {

int ReadProfileFile(const std::string& path, ProfileFile* out) {
  std::error_code ec;
  std::ifstream in(path);
  if (!std::filesystem::is_regular_file(path, ec) || !in) {
    return Usage("--profile: cannot read " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  out->text = ss.str();
  auto profile = simdevice::ParseProfile(out->text);
  if (!profile.ok()) return Error(2, "profile " + path + ": " + profile.status().message());
  out->info = *profile;
  return 0;
}

}  // namespace ts::cli
