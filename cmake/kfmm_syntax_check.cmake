# Kokkos 5.2.2 C++20 syntax check: every library header and source, the app's and the
# benchmarks' (CI builds without them: this keeps them compiling),
# must compile with `g++ -std=c++20 -fsyntax-only` against Debian's Kokkos 5.2.2 headers, which
# we cannot link here. Headers are checked on their own (a one-line TU), so each must be
# self-contained.
#
# Two roles in one file:
#  - included from CMake: kfmm_add_kokkos5_syntax_check() registers the ctest test
#    `kokkos5_syntax_check` (label `unit`); the headers' location comes from the cache variable
#    KFMM_KOKKOS5_INCLUDE (scripts/setup.sh prints it).
#  - run by that test as `cmake -DCONFIG=<file> -P kfmm_syntax_check.cmake`: finds the files at
#    test time (new files need no reconfigure), compiles them (sources in batches) two at a time
#    from one queue and lists failures.
# When the headers are missing the test prints "skipped: <reason>" and ctest reports it SKIPPED.

set(KFMM_SYNTAX_CHECK_MODULES core comm fmm neighbors integrate io apps perf_tests)
set(KFMM_SYNTAX_CHECK_SKIPPED "kokkos5_syntax_check skipped: ")

if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(KFMM_KOKKOS5_INCLUDE "" CACHE PATH
      "Kokkos 5.x headers (with KokkosCore_config.h) for the C++20 syntax check; empty skips it")

  # Include directories of a target and of the targets it links, for the check's command line.
  function(kfmm_collect_includes out)
    set(dirs)
    foreach(target ${ARGN})
      if(TARGET ${target})
        get_target_property(target_dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
        if(target_dirs)
          list(APPEND dirs ${target_dirs})
        endif()
      endif()
    endforeach()
    set(${out} ${dirs} PARENT_SCOPE)
  endfunction()

  function(kfmm_add_kokkos5_syntax_check)
    kfmm_collect_includes(dependency_includes fmt::fmt yaml-cpp CLI11::CLI11 MPI::MPI_CXX MPI::MPI_C)
    set(includes ${KFMM_BUILD_INCLUDE} ${PROJECT_SOURCE_DIR}/apps ${HDF5_INCLUDE_DIRS} ${dependency_includes})
    list(FILTER includes EXCLUDE REGEX "\\$<")  # generator expressions (install interfaces)
    list(REMOVE_DUPLICATES includes)
    set(config ${CMAKE_CURRENT_BINARY_DIR}/kokkos5_syntax_check/config.cmake)
    file(WRITE ${config}
      "set(COMPILER [[${CMAKE_CXX_COMPILER}]])\n"
      "set(KOKKOS5_INCLUDE [[${KFMM_KOKKOS5_INCLUDE}]])\n"
      "set(INCLUDES [[${includes}]])\n"
      "set(SOURCE_DIR [[${PROJECT_SOURCE_DIR}]])\n"
      "set(WORK_DIR [[${CMAKE_CURRENT_BINARY_DIR}/kokkos5_syntax_check]])\n")
    add_test(NAME kokkos5_syntax_check
             COMMAND ${CMAKE_COMMAND} -DCONFIG=${config} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
    set_tests_properties(kokkos5_syntax_check PROPERTIES
      LABELS "unit;kokkos5" PROCESSORS 2
      SKIP_REGULAR_EXPRESSION "${KFMM_SYNTAX_CHECK_SKIPPED}")
  endfunction()
  return()
endif()

# ---- script mode: the check itself ----
cmake_policy(SET CMP0057 NEW)  # IN_LIST
include(${CONFIG})

# Why the check cannot run, if it cannot.
set(skip_reason "")
if(KOKKOS5_INCLUDE STREQUAL "")
  set(skip_reason "KFMM_KOKKOS5_INCLUDE is empty")
else()
  # scripts/setup.sh leaves a file `unavailable` (saying why) at the top of the unpacked package.
  foreach(marker ${KOKKOS5_INCLUDE}/unavailable ${KOKKOS5_INCLUDE}/../../../unavailable)
    if(EXISTS ${marker} AND skip_reason STREQUAL "")
      file(READ ${marker} skip_reason)
      string(STRIP "${skip_reason}" skip_reason)
      set(skip_reason "Kokkos 5 headers unavailable: ${skip_reason}")
    endif()
  endforeach()
  if(skip_reason STREQUAL "" AND NOT EXISTS ${KOKKOS5_INCLUDE}/KokkosCore_config.h)
    set(skip_reason "no KokkosCore_config.h in ${KOKKOS5_INCLUDE}")
  endif()
endif()
if(NOT skip_reason STREQUAL "")
  # A clean exit: ctest marks the test SKIPPED because of this line.
  message("${KFMM_SYNTAX_CHECK_SKIPPED}${skip_reason}")
  message("  (scripts/setup.sh fetches the headers; configure with -DKFMM_KOKKOS5_INCLUDE=<dir>)")
  return()
endif()
file(STRINGS ${KOKKOS5_INCLUDE}/KokkosCore_config.h version_line REGEX "#define KOKKOS_VERSION [0-9]+")
string(REGEX MATCH "[0-9]+$" kokkos_version "${version_line}")
math(EXPR major "${kokkos_version} / 10000")
math(EXPR minor "${kokkos_version} / 100 % 100")
math(EXPR patch "${kokkos_version} % 100")
set(kokkos_version "${major}.${minor}.${patch}")

set(flags -std=c++20 -fopenmp -fsyntax-only -I${KOKKOS5_INCLUDE})
foreach(dir ${INCLUDES})
  list(APPEND flags -I${dir})
endforeach()

# Units to compile: sources as they are, headers through a generated one-line TU.
file(MAKE_DIRECTORY ${WORK_DIR})
set(units)
set(names)
foreach(module ${KFMM_SYNTAX_CHECK_MODULES})
  file(GLOB headers RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.hpp)
  file(GLOB sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.cpp)
  foreach(header ${headers})
    string(REPLACE "/" "__" tu_name "${header}")
    set(tu ${WORK_DIR}/${tu_name}.cpp)
    if(module STREQUAL apps OR module STREQUAL perf_tests)
      # Headers private to their directory (not installed under kfmm/): by their path.
      set(include_line "#include \"${SOURCE_DIR}/${header}\"\n")
    else()
      set(include_line "#include <kfmm/${header}>\n")
    endif()
    file(WRITE ${tu} "${include_line}")
    list(APPEND units ${tu})
    list(APPEND names ${header})
  endforeach()
  # Sources in batches of up to 5 per module, one generated TU that #includes them: each file
  # would otherwise parse Kokkos on its own, most of the time of the check. A failed batch is
  # checked again file by file (below), which names the file, or clears it if the failure came
  # from putting files together (e.g. equal names in anonymous namespaces).
  list(LENGTH sources source_count)
  if(source_count GREATER 0)
    math(EXPR batch_count "(${source_count} + 4) / 5")
    math(EXPR last_batch "${batch_count} - 1")
    foreach(b RANGE 0 ${last_batch})
      set(tu ${WORK_DIR}/${module}__batch${b}.cpp)
      set(text "// Generated by kfmm_syntax_check.cmake: sources of ${module} checked together.\n")
      set(members)
      set(index 0)
      foreach(source ${sources})
        math(EXPR slot "${index} % ${batch_count}")
        if(slot EQUAL b)
          string(APPEND text "#include \"${SOURCE_DIR}/${source}\"\n")
          list(APPEND members ${source})
        endif()
        math(EXPR index "${index} + 1")
      endforeach()
      file(WRITE ${tu} "${text}")
      list(LENGTH units unit_index)
      set(members_${unit_index} ${members})
      list(JOIN members ", " member_text)
      list(APPEND units ${tu})
      list(APPEND names "${member_text}")
    endforeach()
  endif()
endforeach()
list(LENGTH units count)

# Kokkos_Core.hpp precompiled once: parsing it was most of each unit's time. A unit gets it
# only when everything it checks includes Kokkos anyway (directly or through kfmm headers), so
# what Kokkos brings along (the standard headers) cannot hide a missing include in a file that
# does not include Kokkos; such files are checked without it. Found from the #include lines.
set(kfmm_files)
foreach(module ${KFMM_SYNTAX_CHECK_MODULES})
  file(GLOB module_files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.hpp ${SOURCE_DIR}/${module}/*.cpp)
  list(APPEND kfmm_files ${module_files})
endforeach()
set(with_kokkos)
foreach(file ${kfmm_files})
  file(STRINGS ${SOURCE_DIR}/${file} lines REGEX "^#include [<\"]")
  get_filename_component(dir ${file} DIRECTORY)
  set(deps_${file})
  foreach(line ${lines})
    if(line MATCHES "^#include <Kokkos_")
      list(APPEND with_kokkos ${file})
    elseif(line MATCHES "^#include <kfmm/([a-z0-9_/]+[.]hpp)>")
      list(APPEND deps_${file} ${CMAKE_MATCH_1})
    elseif(line MATCHES "^#include \"([a-z0-9_]+[.]hpp)\"")
      list(APPEND deps_${file} ${dir}/${CMAKE_MATCH_1})
    endif()
  endforeach()
endforeach()
set(changed TRUE)
while(changed)
  set(changed FALSE)
  foreach(file ${kfmm_files})
    if(NOT file IN_LIST with_kokkos)
      foreach(dep ${deps_${file}})
        if(dep IN_LIST with_kokkos)
          list(APPEND with_kokkos ${file})
          set(changed TRUE)
          break()
        endif()
      endforeach()
    endif()
  endforeach()
endwhile()
set(pch ${WORK_DIR}/kokkos5_core.hpp)
file(WRITE ${pch} "#include <Kokkos_Core.hpp>\n")
list(REMOVE_ITEM flags -fsyntax-only)
execute_process(COMMAND ${COMPILER} ${flags} -x c++-header ${pch} -o ${pch}.gch
                RESULT_VARIABLE pch_result ERROR_VARIABLE pch_error OUTPUT_QUIET)
list(APPEND flags -fsyntax-only)
set(pch_flags)
if(pch_result STREQUAL "0")
  set(pch_flags -Winvalid-pch -include ${pch})
else()
  file(REMOVE ${pch}.gch)
  message("Kokkos_Core.hpp could not be precompiled (every unit parses it):\n${pch_error}")
endif()
# pch_<i>: whether unit i gets the precompiled Kokkos_Core.hpp.
set(precompiled 0)
math(EXPR last "${count} - 1")
foreach(i RANGE 0 ${last})
  list(GET names ${i} name)
  if(DEFINED members_${i})
    set(checked ${members_${i}})
  else()
    set(checked ${name})
  endif()
  set(all_kokkos TRUE)
  foreach(file ${checked})
    if(NOT file IN_LIST with_kokkos)
      set(all_kokkos FALSE)
    endif()
  endforeach()
  set(pch_${i} 0)
  if(all_kokkos AND pch_flags)
    set(pch_${i} 1)
    math(EXPR precompiled "${precompiled} + 1")
  endif()
endforeach()
message("Kokkos ${kokkos_version} (${KOKKOS5_INCLUDE}), ${COMPILER} -std=c++20: checking ${count} units (headers alone, sources in batches; ${precompiled} with Kokkos_Core.hpp precompiled)")

# Two compilers at a time from one queue (xargs -P 2), the batches (the longest units) first, so
# that a long unit does not hold up the next one. A failure is compiled again alone (below).
set(log_dir ${WORK_DIR}/logs)
file(REMOVE_RECURSE ${log_dir})
file(MAKE_DIRECTORY ${log_dir})
list(JOIN flags " " flag_line)
list(JOIN pch_flags " " pch_line)
file(WRITE ${WORK_DIR}/check_one.sh
  "#!/bin/sh\n"
  "# check_one.sh INDEX PCH FILE: one unit of the check (PCH 1: with the precompiled Kokkos_Core.hpp);\n"
  "# its exit code goes to logs/INDEX.status.\n"
  "extra=\n"
  "[ \"$2\" = 1 ] && extra=\"${pch_line}\"\n"
  "\"${COMPILER}\" ${flag_line} $extra \"$3\" > /dev/null 2>&1\n"
  "echo $? > \"${log_dir}/$1.status\"\n")
# Batches by the bytes of their sources, largest first (a proxy for their compile time), then
# the headers.
set(batch_lines)
set(header_lines)
foreach(i RANGE 0 ${last})
  list(GET units ${i} unit)
  if(DEFINED members_${i})
    set(bytes 0)
    foreach(member ${members_${i}})
      file(SIZE ${SOURCE_DIR}/${member} member_bytes)
      math(EXPR bytes "${bytes} + ${member_bytes}")
    endforeach()
    math(EXPR sort_key "1000000000 + ${bytes}")  # fixed width: list(SORT) compares text
    list(APPEND batch_lines "${sort_key}|${i} ${pch_${i}} ${unit}")
  else()
    list(APPEND header_lines "${i} ${pch_${i}} ${unit}")
  endif()
endforeach()
list(SORT batch_lines ORDER DESCENDING)
list(TRANSFORM batch_lines REPLACE "^[0-9]+[|]" "")
set(job_lines ${batch_lines} ${header_lines})
list(JOIN job_lines "\n" text)
file(WRITE ${WORK_DIR}/units.txt "${text}\n")
execute_process(COMMAND xargs -P 2 -L 1 -a ${WORK_DIR}/units.txt sh ${WORK_DIR}/check_one.sh)
set(failed)
foreach(i RANGE 0 ${last})
  list(GET names ${i} name)
  set(result 1)
  if(EXISTS ${log_dir}/${i}.status)
    file(STRINGS ${log_dir}/${i}.status result)
  endif()
  if(result STREQUAL "0")
    message("  ok    ${name}")
  else()
    message("  FAIL  ${name}")
    list(APPEND failed ${i})
  endif()
endforeach()

# A failed batch: its files one by one; those results are the verdict.
set(failed_units)
foreach(index ${failed})
  list(GET units ${index} unit)
  if(DEFINED members_${index})
    foreach(member ${members_${index}})
      execute_process(COMMAND ${COMPILER} ${flags} ${SOURCE_DIR}/${member} RESULT_VARIABLE result OUTPUT_QUIET ERROR_QUIET)
      if(result STREQUAL "0")
        message("  ok    ${member} (alone; its batch failed)")
      else()
        message("  FAIL  ${member} (alone)")
        list(APPEND failed_units "${SOURCE_DIR}/${member}|${member}")
      endif()
    endforeach()
  else()
    list(GET names ${index} name)
    list(APPEND failed_units "${unit}|${name}")
  endif()
endforeach()
set(failed ${failed_units})

if(failed)
  set(failed_names)
  foreach(entry ${failed})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 unit)
    list(GET parts 1 name)
    list(APPEND failed_names ${name})
    execute_process(COMMAND ${COMPILER} ${flags} ${unit} ERROR_VARIABLE diagnostics OUTPUT_QUIET)
    message("\n==== ${name} under Kokkos ${kokkos_version} ====\n${diagnostics}")
  endforeach()
  list(LENGTH failed failed_count)
  list(JOIN failed_names ", " failed_list)
  message(FATAL_ERROR "${failed_count} files do not compile with Kokkos ${kokkos_version} "
                      "and -std=c++20: ${failed_list}")
endif()
message("all ${count} units (every header alone, the sources in batches) compile with Kokkos ${kokkos_version} and -std=c++20")
