# Test settings and programs beyond one suite per folder; included by tests/CMakeLists.txt.

# The serialization tests craft hostile messages with the Cap'n Proto builder, and gzip files
# and checksums with zlib.
find_package(ZLIB REQUIRED)
if(TARGET serialization_tests)
  target_link_libraries(serialization_tests PRIVATE CapnProto::capnp ZLIB::ZLIB)
endif()

# serialization_asan_tests: the loader's corruption tests again, with graph/ and serialization/
# compiled into the program under AddressSanitizer and UndefinedBehaviorSanitizer, so that a
# read past a buffer or undefined behaviour while decoding hostile bytes fails a test instead of
# passing by luck. Kept small: the tests of readers of untrusted bytes (graph_io_corruption,
# checkpoint, idx_reader).
option(ACTORFLOW_ASAN_TESTS "Build serialization_asan_tests (ASan + UBSan)" ON)
if(ACTORFLOW_ASAN_TESTS AND ACTORFLOW_SERIALIZATION_SOURCES AND TARGET actorflow_graph)
  get_target_property(asan_graph_sources actorflow_graph SOURCES)
  get_target_property(asan_graph_dir actorflow_graph SOURCE_DIR)
  list(TRANSFORM asan_graph_sources PREPEND "${asan_graph_dir}/")
  get_target_property(asan_graph_links actorflow_graph LINK_LIBRARIES)
  if(NOT asan_graph_links)
    set(asan_graph_links "")
  endif()
  # The generated capnp sources come from a custom command in serialization/.
  set(asan_generated ${ACTORFLOW_SERIALIZATION_SOURCES})
  list(FILTER asan_generated INCLUDE REGEX "\\.c\\+\\+$")
  set_source_files_properties(${asan_generated} PROPERTIES GENERATED TRUE)
  set(asan_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

  add_executable(serialization_asan_tests
    ${CMAKE_CURRENT_SOURCE_DIR}/support/catch_main.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/serialization/graph_io_corruption.test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/serialization/checkpoint.test.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/serialization/idx_reader.test.cpp
    ${asan_graph_sources}
    ${ACTORFLOW_SERIALIZATION_SOURCES})
  # Runs capnp_generate_cpp's command before this program compiles its output.
  add_dependencies(serialization_asan_tests actorflow_serialization)
  target_include_directories(serialization_asan_tests PRIVATE
    ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(serialization_asan_tests PRIVATE ${asan_flags} -O1 -g)
  target_link_options(serialization_asan_tests PRIVATE ${asan_flags})
  target_link_libraries(serialization_asan_tests PRIVATE
    Catch2::Catch2 CapnProto::capnp ZLIB::ZLIB Threads::Threads ${asan_graph_links})
  catch_discover_tests(serialization_asan_tests
    TEST_PREFIX "serialization-asan: "
    PROPERTIES TIMEOUT 600
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()

# The fuzzers (tests/fuzz/): libFuzzer needs clang, so they are a project of their own built
# with clang++ after serialization/ generated its Cap'n Proto code. ctest runs each briefly
# (ACTORFLOW_FUZZ_SECONDS, 10 s) from its corpus in tests/fuzz/corpus/; `make fuzz` runs them
# longer.
find_program(ACTORFLOW_CLANGXX NAMES clang++)
option(ACTORFLOW_FUZZERS "Build the libFuzzer fuzzers (needs clang++) and run them briefly in ctest" ON)
set(ACTORFLOW_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzzer runs in ctest")
if(ACTORFLOW_FUZZERS AND ACTORFLOW_CLANGXX AND TARGET actorflow_serialization)
  include(ExternalProject)
  ExternalProject_Add(actorflow_fuzzers
    SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz
    BINARY_DIR ${PROJECT_BINARY_DIR}/fuzz
    CMAKE_GENERATOR ${CMAKE_GENERATOR}
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${ACTORFLOW_CLANGXX}
               -DACTORFLOW_SOURCE_DIR=${PROJECT_SOURCE_DIR}
               -DACTORFLOW_BINARY_DIR=${PROJECT_BINARY_DIR}
               -DCMAKE_MODULE_PATH=${PROJECT_SOURCE_DIR}/cmake
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    DEPENDS actorflow_serialization)
  foreach(fuzzer tensor_header bulk_frame graph_loader checkpoint_loader)
    add_test(NAME "fuzz: ${fuzzer} decoder from its corpus"
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh ${PROJECT_BINARY_DIR}/fuzz/fuzz_${fuzzer}
                     ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${fuzzer} ${ACTORFLOW_FUZZ_SECONDS})
    set_tests_properties("fuzz: ${fuzzer} decoder from its corpus" PROPERTIES TIMEOUT 300)
  endforeach()
elseif(ACTORFLOW_FUZZERS)
  message(STATUS "actorflow: no clang++, so no fuzzers (apt-get install clang libclang-rt-dev)")
endif()
