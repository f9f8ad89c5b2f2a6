// safetensors files (README.md, "Checkpoints"): an 8-byte little-endian header length, a JSON
// header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the raw little-endian buffers. Read through mmap, written with nlohmann/json; no other
// dependency. A sharded checkpoint is `model.safetensors.index.json` ({"weight_map": {name:
// shard file}}) beside its shards.
//
// Errors name the file and the tensor: a truncated file, a buffer whose size disagrees with its
// dtype and shape (a mislabelled dtype), an unknown dtype, a missing tensor, a shape the model
// does not have.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"
#include "workers/zoo/model.h"

namespace ts::zoo {

// Writes `tensors` (any device; written from CPU contiguous copies) to `path`. Supported dtypes:
// F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL. `metadata` goes under "__metadata__".
Status WriteSafetensors(const std::string& path, const TensorMap& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// Every tensor of one file, as CPU tensors of the file's dtypes (copied out of the mapping).
StatusOr<TensorMap> ReadSafetensors(const std::string& path);

// The same two in memory: the bytes WriteSafetensors would write, and the tensors of such bytes
// (errors name the file as `name`). With `metadata`, it receives "__metadata__" (string values).
StatusOr<std::string> EncodeSafetensors(const TensorMap& tensors,
                                        const std::map<std::string, std::string>& metadata = {});
StatusOr<TensorMap> DecodeSafetensors(std::string_view bytes, const std::string& name,
                                      std::map<std::string, std::string>* metadata = nullptr);

// The checkpoint in folder `dir`: `model.safetensors`, else the shards that
// `model.safetensors.index.json` names. NOT_FOUND when the folder has neither.
StatusOr<TensorMap> ReadCheckpoint(const std::string& dir);

// The weights `model` needs, taken from `checkpoint` by their HF state_dict names and converted
// to `dtype`: INVALID_ARGUMENT naming the tensor when one is missing or has another shape.
// Checkpoint tensors the model does not use (tied copies, buffers) are ignored.
StatusOr<WeightMap> WeightsFromCheckpoint(const Model& model, const TensorMap& checkpoint,
                                          at::ScalarType dtype = at::kFloat);

// The folder of `model_id` ("org/name") under a Hub-mirror-style `weights_dir`
// (weights_dir/org/name); "" when it holds no checkpoint.
std::string CheckpointDirFor(const std::string& weights_dir, const std::string& model_id);

}  // namespace ts::zoo
