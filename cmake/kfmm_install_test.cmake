# The installed package works for an outside project: installs this build into a fresh prefix,
# then configures, builds and runs unit_tests/install (find_package(kfmm) + kfmm::kfmm) on 2 ranks.
#
# Two roles in one file:
#  - included from CMake: kfmm_add_install_test() registers the ctest test `install_find_package`
#    (label `unit`);
#  - run by that test as `cmake -DCONFIG=<file> -P kfmm_install_test.cmake`.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  function(kfmm_add_install_test)
    # The outside project finds Kokkos as a user would: through CMAKE_PREFIX_PATH (this build's,
    # plus the prefix of the Kokkos this build found, e.g. when it came from Kokkos_DIR).
    set(prefix_path ${CMAKE_PREFIX_PATH})
    if(Kokkos_DIR)
      get_filename_component(kokkos_prefix "${Kokkos_DIR}/../../.." ABSOLUTE)
      list(APPEND prefix_path ${kokkos_prefix})
    endif()
    # A sanitized libkfmm needs a sanitized executable (the ASan runtime must load first).
    set(app_flags "")
    if(KFMM_ENABLE_SANITIZERS)
      set(app_flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
    endif()
    set(work ${CMAKE_CURRENT_BINARY_DIR}/install_test)
    set(config ${work}/config.cmake)
    file(WRITE ${config}
      "set(BUILD_DIR [[${PROJECT_BINARY_DIR}]])\n"
      "set(APP_SOURCE_DIR [[${PROJECT_SOURCE_DIR}/unit_tests/install]])\n"
      "set(WORK_DIR [[${work}]])\n"
      "set(PREFIX_PATH [[${prefix_path}]])\n"
      "set(CXX_COMPILER [[${CMAKE_CXX_COMPILER}]])\n"
      "set(APP_FLAGS [[${app_flags}]])\n"
      "set(MPIEXEC [[${MPIEXEC_EXECUTABLE}]])\n"
      "set(MPIEXEC_NUMPROC_FLAG [[${MPIEXEC_NUMPROC_FLAG}]])\n")
    add_test(NAME install_find_package
             COMMAND ${CMAKE_COMMAND} -DCONFIG=${config} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
    set_tests_properties(install_find_package PROPERTIES
      LABELS "unit;install" PROCESSORS 2
      ENVIRONMENT "${KFMM_TEST_ENVIRONMENT};OMP_NUM_THREADS=1")
  endfunction()
  return()
endif()

# ---- script mode: the test itself ----
include(${CONFIG})

function(run_step what)
  message("-- ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result STREQUAL "0")
    message(FATAL_ERROR "${what} failed (${result}):\n${output}")
  endif()
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(app_build ${WORK_DIR}/app-build)
file(REMOVE_RECURSE ${prefix})  # only what this build installs, nothing stale

run_step("installing ${BUILD_DIR} into ${prefix}"
         ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# CMAKE_PREFIX_PATH as an environment variable (':'-separated), as a user's shell would set it;
# a ';'-list would not survive being passed through run_step's arguments.
list(PREPEND PREFIX_PATH ${prefix})
list(REMOVE_DUPLICATES PREFIX_PATH)
string(REPLACE ";" ":" prefix_path "${PREFIX_PATH}")
set(ENV{CMAKE_PREFIX_PATH} "${prefix_path}")
run_step("configuring the outside project ${APP_SOURCE_DIR} (CMAKE_PREFIX_PATH=${prefix_path})"
         ${CMAKE_COMMAND} -S ${APP_SOURCE_DIR} -B ${app_build} -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
         "-DCMAKE_CXX_FLAGS=${APP_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${APP_FLAGS}")
# It must have used the installed package, not the build tree.
file(STRINGS ${app_build}/CMakeCache.txt kfmm_dir_line REGEX "^kfmm_DIR:")
string(FIND "${kfmm_dir_line}" "${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the outside project found kfmm elsewhere (${kfmm_dir_line}), not in ${prefix}")
endif()
run_step("building it" ${CMAKE_COMMAND} --build ${app_build})
run_step("running it on 2 ranks"
         ${MPIEXEC} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} 2 ${app_build}/kfmm_install_app)
message("${step_output}")
