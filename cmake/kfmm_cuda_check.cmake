# CUDA compile check (issue 11): every .cpp of the library, the app and the unit tests must
# compile with nvcc for a GPU (sm_90) against Kokkos 5.2.2's headers configured for CUDA + Serial,
# with GPU-aware MPI on. No GPU and no CUDA build of Kokkos are needed: the few headers that a
# Kokkos build generates (KokkosCore_config.h, the backend lists, desul's Config.hpp) are written
# for CUDA from Debian's OpenMP ones at configure time.
#
# Two roles in one file, like kfmm_syntax_check.cmake:
#  - included from CMake: kfmm_add_cuda_compile_check() finds nvcc (CUDA_HOME, CUDA_PATH, PATH,
#    then CMake's CUDAToolkit module), writes the configuration headers and registers the ctest
#    test `cuda_compile_check` (labels `unit;cuda`);
#  - run by that test as `cmake -DCONFIG=<file> -P kfmm_cuda_check.cmake`: finds the files at test
#    time, compiles them in batches, two batches at a time, lists failures with their diagnostics.
# Errors fail the check, and so do the warnings that mean wrong device code: a host function
# called from device code (cross-execution-space-call, made an error) and ptxas warnings (stack
# size that cannot be determined, e.g. recursion), read from the output.
# Without nvcc or the Kokkos 5 headers the test prints "skipped: <reason>" (ctest: SKIPPED).

# Not fuzz_tests/: libFuzzer drivers for clang only (they include clang's FuzzedDataProvider.h);
# every kfmm source they exercise is checked here.
set(KFMM_CUDA_CHECK_MODULES core comm fmm neighbors integrate io apps unit_tests)
set(KFMM_CUDA_CHECK_SKIPPED "cuda_compile_check skipped: ")
set(KFMM_CUDA_CHECK_ARCH sm_90)

if(NOT CMAKE_SCRIPT_MODE_FILE)
  # nvcc: $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, then the CUDAToolkit module's search.
  function(kfmm_find_nvcc out)
    find_program(KFMM_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin
                 DOC "nvcc for the CUDA compile check")
    if(NOT KFMM_NVCC)
      find_package(CUDAToolkit QUIET)
      if(CUDAToolkit_NVCC_EXECUTABLE)
        set(KFMM_NVCC ${CUDAToolkit_NVCC_EXECUTABLE} CACHE FILEPATH "nvcc for the CUDA compile check" FORCE)
      endif()
    endif()
    set(${out} "${KFMM_NVCC}" PARENT_SCOPE)
  endfunction()

  # Writes the generated Kokkos headers of a CUDA + Serial build into `dir`; sets `error` to why
  # it could not (empty on success).
  function(kfmm_write_cuda_kokkos_config kokkos_include dir error)
    set(${error} "" PARENT_SCOPE)
    set(config ${kokkos_include}/KokkosCore_config.h)
    if(NOT EXISTS ${config})
      set(${error} "no KokkosCore_config.h in '${kokkos_include}'" PARENT_SCOPE)
      return()
    endif()
    file(READ ${config} text)
    # Each entry: what Debian's OpenMP build says, what a CUDA + Serial build for Hopper says.
    set(edits
      "/* #undef KOKKOS_ENABLE_SERIAL */" "#define KOKKOS_ENABLE_SERIAL"
      "#define KOKKOS_ENABLE_OPENMP" "/* #undef KOKKOS_ENABLE_OPENMP */"
      "/* #undef KOKKOS_ENABLE_CUDA */" "#define KOKKOS_ENABLE_CUDA"
      "/* #undef KOKKOS_ENABLE_CUDA_CONSTEXPR */" "#define KOKKOS_ENABLE_CUDA_CONSTEXPR"
      "/* #undef KOKKOS_ARCH_HOPPER */" "#define KOKKOS_ARCH_HOPPER"
      "/* #undef KOKKOS_ARCH_HOPPER90 */" "#define KOKKOS_ARCH_HOPPER90")
    list(LENGTH edits count)
    math(EXPR last "${count} - 1")
    foreach(i RANGE 0 ${last} 2)
      math(EXPR j "${i} + 1")
      list(GET edits ${i} from)
      list(GET edits ${j} to)
      string(FIND "${text}" "${from}" at)
      if(at EQUAL -1)
        set(${error} "'${from}' not found in ${config}: not the Kokkos 5.2 OpenMP configuration this check edits"
            PARENT_SCOPE)
        return()
      endif()
      string(REPLACE "${from}" "${to}" text "${text}")
    endforeach()
    file(WRITE ${dir}/KokkosCore_config.h "${text}")
    # Serial before CUDA: the CUDA headers use the host space's execution space.
    file(WRITE ${dir}/KokkosCore_Config_DeclareBackend.hpp
      "#ifndef KOKKOS_DECLARE_HPP_\n#define KOKKOS_DECLARE_HPP_\n"
      "#include <decl/Kokkos_Declare_SERIAL.hpp>\n#include <decl/Kokkos_Declare_CUDA.hpp>\n#endif\n")
    file(WRITE ${dir}/KokkosCore_Config_FwdBackend.hpp
      "#ifndef KOKKOS_FWD_HPP_\n#define KOKKOS_FWD_HPP_\n"
      "#include <fwd/Kokkos_Fwd_SERIAL.hpp>\n#include <fwd/Kokkos_Fwd_CUDA.hpp>\n#endif\n")
    file(WRITE ${dir}/KokkosCore_Config_SetupBackend.hpp
      "#ifndef KOKKOS_SETUP_HPP_\n#define KOKKOS_SETUP_HPP_\n#include <setup/Kokkos_Setup_Cuda.hpp>\n#endif\n")
    set(desul ${kokkos_include}/desul/atomics/Config.hpp)
    if(NOT EXISTS ${desul})
      set(${error} "no desul/atomics/Config.hpp in '${kokkos_include}'" PARENT_SCOPE)
      return()
    endif()
    file(READ ${desul} text)
    string(REPLACE "/* #undef DESUL_ATOMICS_ENABLE_CUDA */" "#define DESUL_ATOMICS_ENABLE_CUDA" text "${text}")
    file(WRITE ${dir}/desul/atomics/Config.hpp "${text}")
    # kfmm's own generated header as a GPU build with GPU-aware MPI would have it.
    file(WRITE ${dir}/kfmm/build_config.hpp
      "#pragma once\n#define KFMM_VERSION_STRING \"${PROJECT_VERSION}\"\n#define KFMM_ENABLE_GPU_AWARE_MPI 1\n"
      "#define KFMM_ENABLE_KOKKOSKERNELS 0\n#define KFMM_EXPANSION_ORDER_MASK 0x1fe\n"
      "#define KFMM_EXPANSION_ORDERS_TEXT \"1 2 3 4 5 6 7 8\"\n")
  endfunction()

  function(kfmm_add_cuda_compile_check)
    set(work ${CMAKE_CURRENT_BINARY_DIR}/cuda_compile_check)
    set(config_dir ${work}/include)
    file(MAKE_DIRECTORY ${config_dir}/desul/atomics ${config_dir}/kfmm)
    set(skip_reason "")
    kfmm_find_nvcc(nvcc)
    if(NOT nvcc)
      set(skip_reason "nvcc not found (looked in \$CUDA_HOME/bin, \$CUDA_PATH/bin, PATH and CMake's CUDAToolkit)")
    elseif(KFMM_KOKKOS5_INCLUDE STREQUAL "" OR NOT EXISTS ${KFMM_KOKKOS5_INCLUDE}/KokkosCore_config.h)
      set(skip_reason "no Kokkos 5 headers (KFMM_KOKKOS5_INCLUDE='${KFMM_KOKKOS5_INCLUDE}')")
    else()
      kfmm_write_cuda_kokkos_config(${KFMM_KOKKOS5_INCLUDE} ${config_dir} skip_reason)
    endif()
    # The build tree's module links, without its build_config.hpp (the generated one replaces it).
    set(module_links ${work}/modules)
    file(MAKE_DIRECTORY ${module_links}/kfmm)
    foreach(module ${KFMM_MODULES})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${module} ${module_links}/kfmm/${module} SYMBOLIC)
    endforeach()
    kfmm_collect_includes(dependency_includes fmt::fmt yaml-cpp CLI11::CLI11 MPI::MPI_CXX MPI::MPI_C GTest::gtest)
    set(includes ${config_dir} ${KFMM_KOKKOS5_INCLUDE} ${module_links} ${PROJECT_SOURCE_DIR}/apps
                 ${PROJECT_SOURCE_DIR}/unit_tests ${HDF5_INCLUDE_DIRS} ${dependency_includes})
    list(FILTER includes EXCLUDE REGEX "\\$<")
    list(FILTER includes EXCLUDE REGEX "^/usr/include/?$")  # a system directory: -I would reorder it
    list(REMOVE_DUPLICATES includes)
    set(script_config ${work}/config.cmake)
    file(WRITE ${script_config}
      "set(NVCC [[${nvcc}]])\n"
      "set(HOST_COMPILER [[${CMAKE_CXX_COMPILER}]])\n"
      "set(SKIP_REASON [[${skip_reason}]])\n"
      "set(INCLUDES [[${includes}]])\n"
      "set(SOURCE_DIR [[${PROJECT_SOURCE_DIR}]])\n"
      "set(WORK_DIR [[${work}]])\n")
    add_test(NAME cuda_compile_check
             COMMAND ${CMAKE_COMMAND} -DCONFIG=${script_config} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
    set_tests_properties(cuda_compile_check PROPERTIES
      LABELS "unit;cuda" PROCESSORS 2 TIMEOUT 3600
      SKIP_REGULAR_EXPRESSION "${KFMM_CUDA_CHECK_SKIPPED}")
  endfunction()
  return()
endif()

# ---- script mode: the check itself ----
include(${CONFIG})
if(NOT SKIP_REASON STREQUAL "")
  message("${KFMM_CUDA_CHECK_SKIPPED}${SKIP_REASON}")
  return()
endif()

# The device side goes all the way through cicc and ptxas; the host side stops after g++'s
# semantic analysis (-fsyntax-only: templates instantiated, no code generated), which finds
# the host errors and was most of the time of the large test files.
set(flags -x cu -std=c++20 -arch=${KFMM_CUDA_CHECK_ARCH} --extended-lambda --expt-relaxed-constexpr
          -ccbin ${HOST_COMPILER} -Xcompiler -fsyntax-only --Werror cross-execution-space-call
          -DKFMM_CUDA_COMPILE_CHECK)
foreach(dir ${INCLUDES})
  list(APPEND flags -I${dir})
endforeach()

set(units)
foreach(module ${KFMM_CUDA_CHECK_MODULES})
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.cpp)
  list(FILTER sources EXCLUDE REGEX "^unit_tests/install/")  # an outside project, not kfmm's code
  list(APPEND units ${sources})
endforeach()
# A developer may check some files only: cmake -DCONFIG=... -DONLY=<regex> -P kfmm_cuda_check.cmake
if(DEFINED ONLY)
  list(FILTER units INCLUDE REGEX "${ONLY}")
endif()
list(LENGTH units count)
execute_process(COMMAND ${NVCC} --version OUTPUT_VARIABLE version_text)
string(REGEX MATCH "release [0-9.]+" nvcc_release "${version_text}")

# Batches: up to BATCH_SIZE files of one library or app directory in one translation unit (a
# generated file that #includes them). Every file pays for parsing Kokkos's CUDA headers, which is most of the time
# of a small file; a batch pays it once. A batch that fails (errors, a bad warning, or two files
# that clash when put together, such as equal names in anonymous namespaces) is compiled again
# file by file: those results are the verdict, and they name the file. -DBATCH_SIZE=1 checks
# every file alone.
# Twelve: a directory's files in one or two batches, each paying the parse once (README, "Tests",
# has the times against batches of five); the longest batch (four expansion orders) still ends
# before the queue does.
if(NOT DEFINED BATCH_SIZE)
  set(BATCH_SIZE 12)
endif()
set(log_dir ${WORK_DIR}/logs)
set(batch_dir ${WORK_DIR}/batches)
file(REMOVE_RECURSE ${log_dir} ${batch_dir})
file(MAKE_DIRECTORY ${log_dir} ${batch_dir})
set(directories)
foreach(unit ${units})
  get_filename_component(directory ${unit} DIRECTORY)
  list(APPEND directories ${directory})
endforeach()
list(REMOVE_DUPLICATES directories)
set(batches)  # names; batch_<name>_units holds its files
foreach(directory ${directories})
  set(members)
  foreach(unit ${units})
    get_filename_component(unit_directory ${unit} DIRECTORY)
    if(unit_directory STREQUAL directory)
      list(APPEND members ${unit})
    endif()
  endforeach()
  list(LENGTH members member_count)
  # Batches of about equal size: n files in ceil(n / BATCH_SIZE) batches, test files too (a
  # test file's helpers live in its anonymous namespace, so two files with a helper of the same
  # name clash in a batch: the batch is then checked file by file, which passes but costs time;
  # shared helpers belong in a header of unit_tests/, such as device_views.hpp).
  math(EXPR batch_count "(${member_count} + ${BATCH_SIZE} - 1) / ${BATCH_SIZE}")
  math(EXPR last_batch "${batch_count} - 1")
  string(REPLACE "/" "_" stem "${directory}")
  foreach(b RANGE 0 ${last_batch})
    set(name ${stem}_${b})
    set(batch_${name}_units)
    set(text "// Generated by kfmm_cuda_check.cmake: one translation unit of the CUDA compile check.\n")
    set(index 0)
    foreach(unit ${members})
      math(EXPR slot "${index} % ${batch_count}")
      if(slot EQUAL b)
        list(APPEND batch_${name}_units ${unit})
        string(APPEND text "#include \"${SOURCE_DIR}/${unit}\"\n")
      endif()
      math(EXPR index "${index} + 1")
    endforeach()
    file(WRITE ${batch_dir}/${name}.cpp "${text}")
    list(APPEND batches ${name})
  endforeach()
endforeach()
list(LENGTH batches batch_total)
message("nvcc ${nvcc_release} -arch=${KFMM_CUDA_CHECK_ARCH}, Kokkos 5 CUDA + Serial: compiling ${count} files "
        "in ${batch_total} batches of up to ${BATCH_SIZE}")

# The diagnostics that fail a compilation besides its exit code.
set(bad_warning_regex "ptxas warning|Stack size for entry function|cannot be statically determined|calling a __host__")

list(JOIN flags " " flag_line)
file(WRITE ${WORK_DIR}/compile_one.sh
  "#!/bin/sh\n"
  "# compile_one.sh NAME FILE: one compilation of the check; output in logs/NAME.log, exit code in\n"
  "# logs/NAME.status, seconds in logs/NAME.seconds.\n"
  "log=\"${log_dir}/$1\"\n"
  "start=$(date +%s)\n"
  "# Test sources: device side only (-ptx: cicc's front end applies the same device-code rules);\n"
  "# their host code is the library's, which the library's own files check on both sides.\n"
  "case \"$1\" in unit_tests*) mode=-ptx ;; *) mode=-c ;; esac\n"
  "\"${NVCC}\" ${flag_line} $mode \"$2\" -o /dev/null > \"$log.log\" 2>&1\n"
  "echo $? > \"$log.status\"\n"
  "echo $(( $(date +%s) - start )) > \"$log.seconds\"\n")

# run_jobs(list_file): runs its lines (NAME FILE) two at a time (xargs -P 2), so that a slow
# compilation does not hold up the next pair.
function(run_jobs list_file)
  execute_process(COMMAND xargs -P 2 -L 1 -a ${list_file} sh ${WORK_DIR}/compile_one.sh)
endfunction()

# passed(name out): whether logs/<name> ended with exit code 0 and no bad warning.
function(passed name out)
  set(result 1)
  if(EXISTS ${log_dir}/${name}.status)
    file(STRINGS ${log_dir}/${name}.status result)
  endif()
  set(diagnostics "")
  if(EXISTS ${log_dir}/${name}.log)
    file(READ ${log_dir}/${name}.log diagnostics)
  endif()
  if(result STREQUAL "0" AND NOT diagnostics MATCHES "${bad_warning_regex}")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(seconds_of name out)
  set(took "?")
  if(EXISTS ${log_dir}/${name}.seconds)
    file(STRINGS ${log_dir}/${name}.seconds took)
  endif()
  set(${out} ${took} PARENT_SCOPE)
endfunction()

string(TIMESTAMP start "%s")
# Batches with more files first: the queue should not end on one long batch while the other
# compiler idles.
set(job_lines)
set(size ${BATCH_SIZE})
while(size GREATER 0)
  foreach(name ${batches})
    list(LENGTH batch_${name}_units n)
    if(n EQUAL size)
      list(APPEND job_lines "${name} ${batch_dir}/${name}.cpp")
    endif()
  endforeach()
  math(EXPR size "${size} - 1")
endwhile()
list(JOIN job_lines "\n" text)
file(WRITE ${WORK_DIR}/batches.txt "${text}\n")
run_jobs(${WORK_DIR}/batches.txt)

set(retry_units)
foreach(name ${batches})
  passed(${name} ok)
  seconds_of(${name} took)
  list(JOIN batch_${name}_units ", " members)
  if(ok)
    message("  ok    ${took} s  ${members}")
  else()
    message("  again ${took} s  ${members}: the batch failed, compiling its files one by one")
    list(APPEND retry_units ${batch_${name}_units})
  endif()
endforeach()

set(failed)
if(retry_units)
  set(job_lines)
  foreach(unit ${retry_units})
    string(REPLACE "/" "_" log_name "${unit}")
    list(APPEND job_lines "${log_name} ${SOURCE_DIR}/${unit}")
  endforeach()
  list(JOIN job_lines "\n" text)
  file(WRITE ${WORK_DIR}/retries.txt "${text}\n")
  run_jobs(${WORK_DIR}/retries.txt)
  foreach(unit ${retry_units})
    string(REPLACE "/" "_" log_name "${unit}")
    passed(${log_name} ok)
    seconds_of(${log_name} took)
    if(ok)
      message("  ok    ${took} s  ${unit} (alone)")
    else()
      message("  FAIL  ${took} s  ${unit}")
      list(APPEND failed ${unit})
    endif()
  endforeach()
endif()
string(TIMESTAMP stop "%s")
math(EXPR seconds "${stop} - ${start}")

if(failed)
  foreach(unit ${failed})
    string(REPLACE "/" "_" log_name "${unit}")
    file(READ ${log_dir}/${log_name}.log diagnostics)
    string(LENGTH "${diagnostics}" size)
    if(size GREATER 20000)  # nvcc's template notes run to megabytes; the first errors suffice
      string(SUBSTRING "${diagnostics}" 0 20000 diagnostics)
      set(diagnostics "${diagnostics}\n[... cut; all of it in ${log_dir}/${log_name}.log]")
    endif()
    message("\n==== ${unit} under nvcc ====\n${diagnostics}")
  endforeach()
  list(LENGTH failed failed_count)
  list(JOIN failed ", " failed_list)
  message(FATAL_ERROR "${failed_count} of ${count} files do not compile for CUDA (${seconds} s): ${failed_list}")
endif()
message("all ${count} files compile for CUDA (${KFMM_CUDA_CHECK_ARCH}) in ${seconds} s")
