// The one source of each precompiled-header owner target (cmake/precompiled_headers.cmake).
