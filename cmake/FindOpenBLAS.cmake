# Finds OpenBLAS explicitly: the generic libblas.so may point at the slow reference BLAS.
# Defines OpenBLAS::OpenBLAS.
# Prefer OpenBLAS's own cblas.h over the alternatives-managed generic one.
find_path(OpenBLAS_INCLUDE_DIR NAMES cblas.h openblas_config.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas NO_DEFAULT_PATH)
find_path(OpenBLAS_INCLUDE_DIR NAMES openblas_config.h PATH_SUFFIXES openblas openblas-pthread)
find_library(OpenBLAS_LIBRARY NAMES openblas)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLAS REQUIRED_VARS OpenBLAS_LIBRARY OpenBLAS_INCLUDE_DIR
  FAIL_MESSAGE "OpenBLAS not found: install it with `apt-get install libopenblas-dev`")
if(OpenBLAS_FOUND AND NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES
    IMPORTED_LOCATION "${OpenBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIR}")
endif()
mark_as_advanced(OpenBLAS_INCLUDE_DIR OpenBLAS_LIBRARY)
