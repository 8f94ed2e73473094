# kfmm_add_test_executable(NAME SOURCES ...) builds one GoogleTest executable (with the shared
# MPI + Kokkos main); kfmm_register_test(NAME EXECUTABLE [RANKS 1 2 3 4] [THREADS 1 2]
# [LABELS ...] [FILTER gtest-filter] [ARGS ...] [ENV VAR=value ...]) registers it with ctest at
# every rank count (oversubscribed, 1 thread per rank) and, on one rank, at every OpenMP thread
# count. Labels: `unit` on one rank, `mpi` on several, plus the given ones.
set(KFMM_TEST_ENVIRONMENT
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
  OMPI_MCA_btl_vader_single_copy_mechanism=none
  OMP_PROC_BIND=false ASAN_OPTIONS=detect_leaks=0)

function(kfmm_add_test_executable name)
  add_executable(${name} ${ARGN} ${PROJECT_SOURCE_DIR}/unit_tests/test_main.cpp)
  target_link_libraries(${name} PRIVATE kfmm::kfmm GTest::gtest)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/unit_tests)
  # The library's code generation, so that header kernels (e.g. the AVX-512 lane transpose)
  # are tested in the form the library runs them.
  target_compile_options(${name} PRIVATE -fno-math-errno $<$<BOOL:${KFMM_ENABLE_NATIVE}>:-march=native>)
  # Sanitizer instrumentation triples the compile time of a test file. Without it the library
  # stays instrumented (linked -Bsymbolic-functions, it calls its own copies of header templates)
  # and the runtime still checks every heap block; only the test bodies go unchecked.
  if(KFMM_ENABLE_SANITIZERS AND NOT KFMM_SANITIZE_TESTS)
    target_compile_options(${name} PRIVATE -fno-sanitize=all)
  endif()
endfunction()

set(KFMM_TEST_EXCLUDE "" CACHE STRING
    "gtest patterns (':'-separated) that every registered test leaves out, e.g. the sanitizer build's multi-rank and accuracy-at-scale tests")

function(kfmm_register_test name executable)
  cmake_parse_arguments(T "" "FILTER" "RANKS;THREADS;LABELS;ARGS;ENV" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_THREADS)
    set(T_THREADS 1)
  endif()
  # KFMM_TEST_EXCLUDE (gtest patterns, ':'-separated) leaves tests out of every registration.
  set(filter "${T_FILTER}")
  if(NOT KFMM_TEST_EXCLUDE STREQUAL "")
    if(filter STREQUAL "")
      set(filter "-${KFMM_TEST_EXCLUDE}")
    elseif(filter MATCHES "^-")
      set(filter "${filter}:${KFMM_TEST_EXCLUDE}")
    elseif(filter MATCHES "-")
      set(filter "${filter}:${KFMM_TEST_EXCLUDE}")  # already positive-negative
    else()
      set(filter "${filter}-${KFMM_TEST_EXCLUDE}")
    endif()
  endif()
  set(filter_args)
  if(NOT filter STREQUAL "")
    set(filter_args --gtest_filter=${filter})
  endif()
  foreach(np ${T_RANKS})
    if(np EQUAL 1)
      set(thread_counts ${T_THREADS})
      set(kind unit)
    else()
      set(thread_counts 1)
      set(kind mpi)
    endif()
    foreach(nt ${thread_counts})
      set(test_name ${name}.np${np}.t${nt})
      add_test(NAME ${test_name}
               COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${np}
                       $<TARGET_FILE:${executable}> ${filter_args} ${T_ARGS})
      set(environment ${KFMM_TEST_ENVIRONMENT} OMP_NUM_THREADS=${nt} ${T_ENV})
      set_tests_properties(${test_name} PROPERTIES
        ENVIRONMENT "${environment}"
        LABELS "${kind};${T_LABELS}" PROCESSORS ${np})
    endforeach()
  endforeach()
endfunction()
