# A library's src/ as layered folders.
#
#   zccl_layered_sources(VAR LIB ROOT "core:" "stream: core" ...)
#
# Each argument after ROOT names a folder of ROOT and, after the colon, the
# folders its files may use (their symbols and their headers); a folder is
# listed after every folder it uses. VAR receives the folders' .c files, and
# ${LIB}_layers.txt in the build folder records the rules for the layers test
# (tests/api/layers.sh), which fails on any other use between folders. A .c
# file outside the listed folders is a configure error.
function(zccl_layered_sources var lib root)
  set(sources "")
  set(rules "")
  set(seen "")
  foreach(decl IN LISTS ARGN)
    string(REGEX MATCH "^([a-z_]+):(.*)$" ok "${decl}")
    if(NOT ok)
      message(FATAL_ERROR "${lib}: bad layer '${decl}' (want 'folder: used ...')")
    endif()
    set(folder ${CMAKE_MATCH_1})
    string(STRIP "${CMAKE_MATCH_2}" uses)
    separate_arguments(uses)
    foreach(u IN LISTS uses)
      if(NOT u IN_LIST seen)
        message(FATAL_ERROR "${lib}: folder ${folder} uses ${u}, which is not listed before it")
      endif()
    endforeach()
    list(APPEND seen ${folder})
    string(APPEND rules "${decl}\n")
    file(GLOB found CONFIGURE_DEPENDS ${root}/${folder}/*.c)
    list(APPEND sources ${found})
  endforeach()
  file(GLOB_RECURSE all CONFIGURE_DEPENDS ${root}/*.c)
  foreach(f IN LISTS all)
    if(NOT f IN_LIST sources)
      message(FATAL_ERROR "${lib}: ${f} lies outside the layered folders of ${root}")
    endif()
  endforeach()
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${lib}_layers.txt "${rules}")
  set(${var} ${sources} PARENT_SCOPE)
endfunction()
