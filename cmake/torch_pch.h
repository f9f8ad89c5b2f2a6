// Precompiled header shared by every torch target (see CMakeLists.txt, ts_torch_target).
#pragma once
#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>
