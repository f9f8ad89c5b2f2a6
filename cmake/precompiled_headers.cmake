# Precompiled headers, one per kind of code (bench/RESULTS.md, "The build", has the figures):
#   cmake/aten_pch.h      ts_torch_target(t)      ATen: the zoo, simdevice, catalog, runner, CLI
#   cmake/torch_pch.h     ts_torch_jit_target(t)  + torch/torch.h and the JIT: the engine
#   cmake/service_pch.h   ts_service_target(t)    gRPC, protobuf, our stubs, Abseil, GoogleTest
# Loading a header costs every translation unit of a target a fixed time (GCC re-instantiates
# the templates the header left pending: ~8 s for torch_pch.h, ~3 s for aten_pch.h), so each
# target gets the smallest header that covers it, and files of a torch target that include no
# torch header skip it (ts_torch_free_sources).
#
# Each header is built once by a small owner target; users reuse it (REUSE_FROM). GCC uses a
# precompiled header only if the user's -f/-m/-p options (-pthread, -fsanitize) and the macros
# the header tests match the owner's, so the owner and its users get them from the same place
# here; CMake adds -Winvalid-pch, and with TS_WERROR a mismatch fails the build instead of
# silently parsing the header in every file.

# ATen (and the JIT header's) owners: what every torch target gets from ts_torch_common().
function(ts_torch_common target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  # -pthread (hence _REENTRANT) comes with the gRPC/protobuf libraries that some torch targets
  # also link: every torch target is compiled with it, or GCC refuses the header for those.
  target_compile_options(${target} PRIVATE -pthread)
  # Torch's own headers trip -Wshadow/-Wpedantic; they are system headers for us.
  target_include_directories(${target} SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
endfunction()

# An owner: an object library with one empty source, for which CMake builds the header once
# for itself and every REUSE_FROM user. It gets our warning set so that the header is compiled
# as its users are.
function(ts_pch_owner owner header)
  add_library(${owner} OBJECT ${CMAKE_SOURCE_DIR}/cmake/pch_owner.cc)
  target_precompile_headers(${owner} PRIVATE ${header})
  ts_target_warnings(${owner})
endfunction()

ts_pch_owner(ts_aten_pch ${CMAKE_SOURCE_DIR}/cmake/aten_pch.h)
ts_torch_common(ts_aten_pch)
target_link_libraries(ts_aten_pch PRIVATE nlohmann_json::nlohmann_json)

ts_pch_owner(ts_torch_pch ${CMAKE_SOURCE_DIR}/cmake/torch_pch.h)
ts_torch_common(ts_torch_pch)
target_link_libraries(ts_torch_pch PRIVATE nlohmann_json::nlohmann_json)

# A torch target: libtorch linked, ATen precompiled. A file that needs more (torch/library.h,
# autograd functions, the tracer) includes it after the header, as it would without one.
function(ts_torch_target target)
  ts_torch_common(${target})
  target_precompile_headers(${target} REUSE_FROM ts_aten_pch)
endfunction()

# A torch target whose files use torch/torch.h or the JIT throughout (the engine).
function(ts_torch_jit_target target)
  ts_torch_common(${target})
  target_precompile_headers(${target} REUSE_FROM ts_torch_pch)
endfunction()

# Files of a torch target that include no torch header, directly or through ours: they skip
# the precompiled header (a few seconds each) rather than move to another library.
function(ts_torch_free_sources target)
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                              PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# The services header. Its owner links what the header includes; every user gets the same
# -pthread, sanitizer flags and the one macro the header tests that comes from a link
# (GTEST_HAS_PTHREAD, set by GTest::gtest on test targets only).
set(TS_SERVICE_PCH_DEFINITIONS GTEST_HAS_PTHREAD=1)
function(ts_service_pch_flags target)
  target_compile_options(${target} PRIVATE -pthread)
  # Through a precompiled header GCC 12 no longer treats libstdc++'s inlined std::string code as
  # a system header's, and reports its known -O2 false positives there (an out-of-bounds or
  # overflowing memcpy in char_traits.h, GCC bugs 105329 and 105651) in files that compile
  # without a warning when they parse the same headers themselves.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow
                                             -Wno-restrict)
  endif()
  target_compile_definitions(${target} PRIVATE ${TS_SERVICE_PCH_DEFINITIONS})
  if(TS_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${TS_SANITIZE} -fno-omit-frame-pointer)
  endif()
endfunction()

ts_pch_owner(ts_service_pch ${CMAKE_SOURCE_DIR}/cmake/service_pch.h)
ts_service_pch_flags(ts_service_pch)
# ts_proto: the generated headers, and the order (protoc runs before the header is built).
target_link_libraries(ts_service_pch PRIVATE ts_proto gRPC::grpc++ absl::status absl::statusor
                                             GTest::gtest)

function(ts_service_pch target)
  ts_service_pch_flags(${target})
  target_precompile_headers(${target} REUSE_FROM ts_service_pch)
endfunction()
