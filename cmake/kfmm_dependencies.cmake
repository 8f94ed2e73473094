# Finds every dependency of kfmm. Kokkos: any backend, version 3.4 or newer
# (no version range: Kokkos 3.x configs only accept the same major version otherwise).
include(GNUInstallDirs)
include(CheckSymbolExists)

find_package(Kokkos 3.4 REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
if(KFMM_ENABLE_KOKKOSKERNELS)
  find_package(KokkosKernels REQUIRED)
endif()

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
set(CMAKE_REQUIRED_INCLUDES ${HDF5_INCLUDE_DIRS})
check_symbol_exists(H5_HAVE_PARALLEL "H5pubconf.h" KFMM_HDF5_IS_PARALLEL)
unset(CMAKE_REQUIRED_INCLUDES)
if(NOT KFMM_HDF5_IS_PARALLEL)
  message(FATAL_ERROR "kfmm needs parallel HDF5 (H5_HAVE_PARALLEL); found a serial HDF5 at "
                      "${HDF5_INCLUDE_DIRS}. Install libhdf5-openmpi-dev or point HDF5_ROOT at a parallel build.")
endif()
# HDF5 is private to the library; an interface target keeps its flags in one place.
add_library(kfmm_hdf5 INTERFACE)
target_include_directories(kfmm_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(kfmm_hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_C)
target_compile_definitions(kfmm_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
