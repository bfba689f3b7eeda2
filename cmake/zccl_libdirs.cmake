# Run at install time (install(CODE) includes it with ZCCL_LIBDIR set, after
# every library is installed): make every library name reachable from both lib/ and
# lib64/ of the prefix, as CANN programs link from ${ASCEND_HOME_PATH}/lib64.
# The real directory is CMAKE_INSTALL_LIBDIR; the other one becomes a symlink
# to it when it does not exist yet (so lib64/cmake/zccl and lib64/pkgconfig
# work too), else it gets one symlink per library name and links to the
# package files.
set(_prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
get_filename_component(_real "${ZCCL_LIBDIR}" NAME)
if(_real STREQUAL "lib64")
  set(_other "lib")
else()
  set(_other "lib64")
endif()
set(_other_dir "${_prefix}/${_other}")
if(NOT EXISTS "${_other_dir}" AND NOT IS_SYMLINK "${_other_dir}")
  file(CREATE_LINK "${_real}" "${_other_dir}" SYMBOLIC)
  message(STATUS "Installing: ${_other_dir} -> ${_real}")
elseif(IS_DIRECTORY "${_other_dir}" AND NOT IS_SYMLINK "${_other_dir}")
  file(GLOB _names RELATIVE "${_prefix}/${ZCCL_LIBDIR}" "${_prefix}/${ZCCL_LIBDIR}/lib*.so*")
  foreach(_n IN LISTS _names)
    file(REMOVE "${_other_dir}/${_n}")
    file(CREATE_LINK "../${_real}/${_n}" "${_other_dir}/${_n}" SYMBOLIC)
    message(STATUS "Installing: ${_other_dir}/${_n} -> ../${_real}/${_n}")
  endforeach()
  # The package files too: both compute the prefix from where they are found.
  file(GLOB _pcs RELATIVE "${_prefix}/${ZCCL_LIBDIR}/pkgconfig" "${_prefix}/${ZCCL_LIBDIR}/pkgconfig/*.pc")
  file(MAKE_DIRECTORY "${_other_dir}/pkgconfig" "${_other_dir}/cmake")
  foreach(_n IN LISTS _pcs)
    file(REMOVE "${_other_dir}/pkgconfig/${_n}")
    file(CREATE_LINK "../../${_real}/pkgconfig/${_n}" "${_other_dir}/pkgconfig/${_n}" SYMBOLIC)
  endforeach()
  file(REMOVE "${_other_dir}/cmake/zccl")
  file(CREATE_LINK "../../${_real}/cmake/zccl" "${_other_dir}/cmake/zccl" SYMBOLIC)
endif()
