# The torch the op builds against, as the interface target swish_torch, and the OpenMP runtime torch itself uses.
#
# Not find_package(Torch): for a CUDA build of torch its config demands a CUDA toolkit (Caffe2's public/cuda.cmake
# stops the configure without one), and the CPU-only build of the op (TORCHTRT_SWISH_FORCE_CPU=1, or no nvcc) must
# work with the CUDA torch users have. torch's headers and libraries sit at fixed places under its package folder.

# TORCH_<KEY> variables from cmake/torch_info.py, which also writes _build_info.py to build_info.
function(swish_query_torch build_info)
  execute_process(COMMAND "${Python_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/cmake/torch_info.py" "${build_info}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    swish_fail("cannot read torch from ${Python_EXECUTABLE} (is torch installed there?): ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Z0-9_]+)=(.*)$")
      set(TORCH_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

function(swish_torch_target with_cuda)
  set(lib "${TORCH_ROOT}/lib")
  add_library(swish_torch INTERFACE)
  target_include_directories(swish_torch SYSTEM INTERFACE "${TORCH_ROOT}/include"
                                                          "${TORCH_ROOT}/include/torch/csrc/api/include")
  target_compile_definitions(swish_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${TORCH_CXX11_ABI})
  target_compile_features(swish_torch INTERFACE cxx_std_20)
  target_link_libraries(swish_torch INTERFACE "${lib}/libc10.so" "${lib}/libtorch.so" "${lib}/libtorch_cpu.so")
  if(with_cuda)
    target_link_libraries(swish_torch INTERFACE "${lib}/libc10_cuda.so" "${lib}/libtorch_cuda.so" CUDA::cudart)
  endif()
endfunction()

# The OpenMP runtime libtorch_cpu needs (its NEEDED entry), found where the loader finds it (libtorch_cpu's RPATH /
# RUNPATH, then the system's folders): _C must share it, or torch.set_num_threads would not govern our regions and a
# second runtime would load. Empty when libtorch_cpu names none or it cannot be found.
function(swish_torch_openmp_runtime out)
  set(${out} "" PARENT_SCOPE)
  set(torch_cpu "${TORCH_ROOT}/lib/libtorch_cpu.so")
  if(NOT CMAKE_READELF)  # found by CMake with the toolchain's binutils
    return()
  endif()
  execute_process(COMMAND "${CMAKE_READELF}" -d "${torch_cpu}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0
     OR NOT dynamic MATCHES "\\(NEEDED\\)[^\n]*\\[(lib(gomp|iomp5|omp)(-[0-9a-f]+)?\\.so[.0-9]*)\\]")
    return()
  endif()
  set(name "${CMAKE_MATCH_1}")
  set(search "")
  if(dynamic MATCHES "\\((RPATH|RUNPATH)\\)[^\n]*\\[([^]\n]*)\\]")
    string(REPLACE "$ORIGIN" "${TORCH_ROOT}/lib" rpath "${CMAKE_MATCH_2}")
    string(REPLACE ":" ";" search "${rpath}")
  endif()
  foreach(dir IN LISTS search)
    if(EXISTS "${dir}/${name}")
      file(REAL_PATH "${dir}/${name}" found)
      set(${out} "${found}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  find_library(SWISH_SYSTEM_OPENMP NAMES "${name}" NO_CACHE)
  if(SWISH_SYSTEM_OPENMP)
    file(REAL_PATH "${SWISH_SYSTEM_OPENMP}" found)
    set(${out} "${found}" PARENT_SCOPE)
  endif()
endfunction()
