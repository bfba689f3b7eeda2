# Finds what the optional PyTorch backend needs and sets ZCCL_TORCH (ON when
# every piece is there, unless the user turned it OFF). PyTorch 2.x comes from
# pip (a virtual environment, e.g. the repository's .venv that scripts/venv.sh
# makes): the interpreter is Python3_EXECUTABLE, or .venv/bin/python at the top
# of the source tree when it exists. Torch's include and library directories
# come from that interpreter (torch.utils.cpp_extension), so no TorchConfig is
# needed; pybind11's headers ship inside torch's include directory.
option(ZCCL_BUILD_TORCH "Build the PyTorch backend (zccl_torch) when PyTorch is found" ON)
set(ZCCL_TORCH OFF)
if(ZCCL_BUILD_TORCH AND NOT ZCCL_SANITIZE)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
    set(Python3_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  set(ZCCL_TORCH_QUERY "import torch, torch.utils.cpp_extension as e
print(torch.__version__)
print(','.join(e.include_paths()))
print(','.join(e.library_paths()))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))")
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "${ZCCL_TORCH_QUERY}"
      OUTPUT_VARIABLE ZCCL_TORCH_INFO RESULT_VARIABLE ZCCL_TORCH_RC ERROR_QUIET
      OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(Python3_FOUND AND ZCCL_TORCH_RC EQUAL 0)
    string(REGEX MATCHALL "[^\n]+" ZCCL_TORCH_LINES "${ZCCL_TORCH_INFO}")
    list(GET ZCCL_TORCH_LINES 0 ZCCL_TORCH_VERSION)
    list(GET ZCCL_TORCH_LINES 1 ZCCL_TORCH_INCLUDE_DIRS)
    list(GET ZCCL_TORCH_LINES 2 ZCCL_TORCH_LIBRARY_DIRS)
    list(GET ZCCL_TORCH_LINES 3 ZCCL_TORCH_CXX11_ABI)
    string(REPLACE "," ";" ZCCL_TORCH_INCLUDE_DIRS "${ZCCL_TORCH_INCLUDE_DIRS}")
    string(REPLACE "," ";" ZCCL_TORCH_LIBRARY_DIRS "${ZCCL_TORCH_LIBRARY_DIRS}")
  endif()
  if(ZCCL_TORCH_VERSION AND ZCCL_TORCH_VERSION VERSION_LESS 2.0)
    message(STATUS "zccl_torch: OFF (torch ${ZCCL_TORCH_VERSION} is older than 2.0)")
  elseif(ZCCL_TORCH_VERSION)
    set(ZCCL_TORCH ON)
    enable_language(CXX)
    add_subdirectory(torch)
    message(STATUS "zccl_torch: ON (python ${Python3_EXECUTABLE}, torch ${ZCCL_TORCH_VERSION})")
  else()
    message(STATUS "zccl_torch: OFF (no python with torch 2.x: run scripts/venv.sh, or pass "
                   "-DPython3_EXECUTABLE=<a python that imports torch>)")
  endif()
endif()
