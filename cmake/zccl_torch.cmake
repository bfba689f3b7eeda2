# Finds what the optional PyTorch backend needs and sets ZCCL_TORCH (ON when
# every piece is there, unless the user turned it OFF). Debian's PyTorch lives
# in /usr/bin/python3's dist-packages, so that interpreter is preferred over
# any other python3 on PATH.
option(ZCCL_BUILD_TORCH "Build the PyTorch backend (zccl_torch) when PyTorch is found" ON)
set(ZCCL_TORCH OFF)
if(ZCCL_BUILD_TORCH AND NOT ZCCL_SANITIZE)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  find_package(Torch QUIET)
  find_path(ZCCL_PYBIND11_INCLUDE pybind11/pybind11.h)
  find_library(ZCCL_TORCH_PYTHON_LIBRARY torch_python
    HINTS ${TORCH_INSTALL_PREFIX}/lib ${TORCH_INSTALL_PREFIX}/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  if(Python3_FOUND AND Torch_FOUND AND ZCCL_PYBIND11_INCLUDE AND ZCCL_TORCH_PYTHON_LIBRARY)
    set(ZCCL_TORCH ON)
    enable_language(CXX)
    add_subdirectory(torch)
    message(STATUS "zccl_torch: ON (python ${Python3_EXECUTABLE}, torch ${Torch_VERSION})")
  else()
    message(STATUS "zccl_torch: OFF (needs python3-torch, libtorch-dev, pybind11-dev, "
                   "python3-dev; found python ${Python3_FOUND} torch ${Torch_FOUND} "
                   "pybind11 ${ZCCL_PYBIND11_INCLUDE})")
  endif()
endif()
