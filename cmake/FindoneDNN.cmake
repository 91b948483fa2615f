# Finds oneDNN (Debian's libdnnl-dev) by its library and header, without its own CMake config:
# that one requires OpenCL's headers for a GPU runtime actorflow never uses. Defines
# oneDNN::dnnl. Debian's build runs on OpenMP (libgomp): its primitives take as many threads as
# omp_get_max_threads() says on the calling thread, so callers set that (omp_set_num_threads)
# and link the same libgomp (found by its soname: GCC keeps the libgomp.so link in its own
# folder; clang's libomp would be a second OpenMP runtime).
find_path(oneDNN_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp)
find_library(oneDNN_LIBRARY NAMES dnnl)
find_library(oneDNN_OPENMP_LIBRARY NAMES libgomp.so.1 gomp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(oneDNN REQUIRED_VARS oneDNN_LIBRARY oneDNN_INCLUDE_DIR
  oneDNN_OPENMP_LIBRARY
  FAIL_MESSAGE "oneDNN not found: install it with `apt-get install libdnnl-dev`")
if(oneDNN_FOUND AND NOT TARGET oneDNN::dnnl)
  add_library(oneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(oneDNN::dnnl PROPERTIES
    IMPORTED_LOCATION "${oneDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${oneDNN_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${oneDNN_OPENMP_LIBRARY}")
endif()
mark_as_advanced(oneDNN_INCLUDE_DIR oneDNN_LIBRARY oneDNN_OPENMP_LIBRARY)
