// Precompiled header of the torch/JIT targets (ts_torch_jit_target): the engine's compiler (trace,
// partition, compiled graph, execution plan) and what drives it. Everything in cmake/aten_pch.h
// plus the torch C++ API, the JIT's IR and tracer, autograd functions and op registration.
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/library.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>
