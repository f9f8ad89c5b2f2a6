# Fails when code outside workers/simdevice, or a public header of it (runtime.h, profile.h),
# includes a header from workers/simdevice/internal/: the defect list and the backend's
# internals are private to the simulator (README.md). Run as a test:
#   cmake -DROOT=<source root> -P private_headers_check.cmake
set(offenders "")
foreach(dir IN ITEMS workers services cli tests bench proto)
  file(GLOB_RECURSE files LIST_DIRECTORIES false
       "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.cc" "${ROOT}/${dir}/*.hpp" "${ROOT}/${dir}/*.cpp")
  foreach(file IN LISTS files)
    file(RELATIVE_PATH rel "${ROOT}" "${file}")
    if(rel MATCHES "^workers/simdevice/" AND NOT rel MATCHES "^workers/simdevice/[a-z_]+\\.h$")
      continue()  # the simulator's own sources and tests may use its internals
    endif()
    file(STRINGS "${file}" hits REGEX "#[ \t]*include[ \t]+[\"<]workers/simdevice/internal/")
    if(hits)
      list(APPEND offenders "${rel}")
    endif()
  endforeach()
endforeach()
if(offenders)
  list(JOIN offenders "\n  " text)
  message(FATAL_ERROR "workers/simdevice/internal/ included from outside the simulator:\n  ${text}")
endif()
message(STATUS "workers/simdevice/internal/ is private")
