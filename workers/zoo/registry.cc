// The registry (families_internal.h): the classes every family file registered.
#include <algorithm>

#include "workers/zoo/families_internal.h"

namespace ts::zoo::internal {
namespace {

// Filled during static initialisation (FamilyRegistration), read once by Registry().
std::vector<ArchListFn>& Registrations() {
  static std::vector<ArchListFn> registrations;
  return registrations;
}

}  // namespace

FamilyRegistration::FamilyRegistration(ArchListFn archs) { Registrations().push_back(archs); }

const std::vector<ArchEntry>& Registry() {
  static const std::vector<ArchEntry> kRegistry = [] {
    std::vector<ArchEntry> all;
    for (ArchListFn list : Registrations()) {
      for (auto& e : list()) all.push_back(std::move(e));
    }
    std::sort(all.begin(), all.end(),
              [](const ArchEntry& a, const ArchEntry& b) { return a.info.arch < b.info.arch; });
    // A class registered twice is a programming error in a family file.
    for (size_t i = 1; i < all.size(); ++i) {
      TORCH_CHECK(all[i].info.arch != all[i - 1].info.arch, "zoo: ", all[i].info.arch,
                  " registered twice");
    }
    return all;
  }();
  return kRegistry;
}

const ArchEntry* FindArch(const std::string& arch) {
  const std::vector<ArchEntry>& all = Registry();
  auto it =
      std::lower_bound(all.begin(), all.end(), arch,
                       [](const ArchEntry& e, const std::string& a) { return e.info.arch < a; });
  return it != all.end() && it->info.arch == arch ? &*it : nullptr;
}

}  // namespace ts::zoo::internal
