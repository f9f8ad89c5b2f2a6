// The zoo version of this build: the first 16 hex digits of a SHA-256 over the sources that
// build a model and compute its references (every non-test source of workers/zoo, and the
// engine's and this component's reference code; the list is in CMakeLists.txt), each named by
// its path under the repository. Computed at build time from the files themselves, so two
// builds of the same sources agree on any host, and any change to those files (even a comment)
// makes every stored bundle of the old version miss: a conservative key, never a stale one.
//
// Thread-safety: returns a constant.
#pragma once

namespace ts::refs {

const char* ZooVersion();
// The libtorch version this build links (CMake's Torch_VERSION, as torch/version.h has it), for
// the torch-free side (touchstone-worker asks its scheduler for this build's bundles).
const char* TorchVersion();

}  // namespace ts::refs
