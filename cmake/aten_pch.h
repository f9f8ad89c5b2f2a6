// Precompiled header of the torch targets (ts_torch_target): ATen's tensor API and the dispatcher,
// which the zoo, simdevice, catalog, runner and CLI use, and nlohmann/json. Neither torch/torch.h
// (torch::nn, optim, data, serialize) nor the JIT: half the size of cmake/torch_pch.h, and each
// translation unit that loads it pays about 3 s instead of 8 (bench/RESULTS.md, "The build").
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <nlohmann/json.hpp>
