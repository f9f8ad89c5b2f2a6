// Test helper for programs built on flags.h: runs a parse in this process with stdout and stderr
// captured, so a test sees exactly what a user would.
//
// Thread-safety: redirects the process's file descriptors 1 and 2 while `f` runs; one caller.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ts::flags::testing {

// What a Run printed, and its exit code.
struct Outcome {
  int rc = -1;
  std::string out, err;
};

// Runs `f` with stdout and stderr sent to files, then reads them back.
template <typename F>
inline Outcome Capture(F&& f) {
  std::fflush(stdout);
  std::fflush(stderr);
  char out_path[] = "/tmp/flags_test_out_XXXXXX";
  char err_path[] = "/tmp/flags_test_err_XXXXXX";
  const int out_fd = ::mkstemp(out_path), err_fd = ::mkstemp(err_path);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  Outcome o;
  o.rc = f();
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  for (int fd : {out_fd, err_fd, saved_out, saved_err}) ::close(fd);
  auto read = [](const char* p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    std::remove(p);
    return ss.str();
  };
  o.out = read(out_path);
  o.err = read(err_path);
  return o;
}

}  // namespace ts::flags::testing
