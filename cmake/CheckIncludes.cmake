# Checks the #includes of one layer's files against that layer's rules (cmake -P).
#   -DRULES=<file>    sets LAYER, ROOT (source tree), PUBLIC_ROOTS, ROOTS, FILES, ALLOW, ISOLATE
#                     (TunableopLayers.cmake)
#   -DSTAMP=<file>    touched when every include is allowed
#   -DCHECK=<file> -DPRETEND=<path>   check one other file as if it lived at PRETEND (tests)
# Both forms are read: "x" and <x>. An include is the project's when it names a public header
# (a file under include/<root>/ for one of PUBLIC_ROOTS) or a file under src/; the project's
# includes must be allowed, the rest (the standard library, fmt, CUDA, ...) pass:
# - a public header is allowed when it lies under one of the layer's ROOTS (by folder: core's
#   headers are include/core/tunableop/*.h, the ops' include/ops/tunableop/*.h);
# - a src/ path is allowed when it starts with an ALLOW entry ending in '/', or equals one;
# - a quoted include without '/' names a file of the same folder and passes;
# - under an ISOLATE folder (backends/cuda), a file in subfolder X may include that folder's X/
#   and common/ only: subfolders never include each other;
# - paths with ".." are never allowed, nor a quoted path with '/' that is not the project's.
cmake_policy(VERSION 3.25)
include(${RULES})
string(REPLACE ";" " " _allowed "${ALLOW}")
string(REPLACE ";" ", " _roots "${ROOTS}")
if(CHECK)
  set(FILES ${CHECK})
endif()

set(_violations "")
foreach(_file IN LISTS FILES)
  if(PRETEND)
    set(_rel ${PRETEND})
  else()
    file(RELATIVE_PATH _rel ${ROOT} ${_file})
  endif()
  file(STRINGS ${_file} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][^\">]+[\">]")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">].*$" "\\1;\\2" _parts "${_line}")
    list(GET _parts 0 _form)
    list(GET _parts 1 _inc)
    if(_form STREQUAL "\"")
      set(_shown "\"${_inc}\"")
    else()
      set(_shown "<${_inc}>")
    endif()
    # Whose header is it?
    set(_public_of "")
    foreach(_r IN LISTS PUBLIC_ROOTS)
      if(NOT _public_of AND EXISTS "${ROOT}/include/${_r}/${_inc}" AND NOT IS_DIRECTORY "${ROOT}/include/${_r}/${_inc}")
        set(_public_of ${_r})
      endif()
    endforeach()
    set(_internal FALSE)
    if(EXISTS "${ROOT}/src/${_inc}" AND NOT IS_DIRECTORY "${ROOT}/src/${_inc}")
      set(_internal TRUE)
    endif()

    set(_ok FALSE)
    if(_inc MATCHES "\\.\\.")
      set(_why "relative paths that leave the folder are not allowed")
    elseif(_form STREQUAL "\"" AND NOT _inc MATCHES "/")
      set(_ok TRUE)  # the same folder
    elseif(_public_of)
      if(_public_of IN_LIST ROOTS)
        set(_ok TRUE)
      else()
        set(_why "a public header of ${_public_of} (include/${_public_of}); layer ${LAYER} may include public headers of: ${_roots}")
      endif()
    elseif(_internal OR _form STREQUAL "\"")
      set(_why "layer ${LAYER} may include only: ${_allowed} (and public headers of: ${_roots})")
      foreach(_allow IN LISTS ALLOW)
        string(LENGTH "${_allow}" _n)
        string(SUBSTRING "${_inc}" 0 ${_n} _head)
        if(_allow MATCHES "/$" AND _head STREQUAL _allow)
          set(_ok TRUE)
        elseif(_inc STREQUAL _allow)
          set(_ok TRUE)
        endif()
      endforeach()
      foreach(_iso IN LISTS ISOLATE)
        if(_ok AND _inc MATCHES "^${_iso}/" AND _rel MATCHES "^src/${_iso}/([^/]+)/")
          set(_mine ${CMAKE_MATCH_1})
          string(REGEX MATCH "^${_iso}/([^/]+)/" _m "${_inc}")
          if(NOT _m OR (NOT CMAKE_MATCH_1 STREQUAL _mine AND NOT CMAKE_MATCH_1 STREQUAL "common"))
            set(_ok FALSE)
            set(_why "subfolders of ${_iso} do not include each other (shared pieces go to ${_iso}/common)")
          endif()
        endif()
      endforeach()
    else()
      set(_ok TRUE)  # <...> of another project
    endif()
    if(NOT _ok)
      string(APPEND _violations "  ${_rel}: #include ${_shown}: ${_why}\n")
    endif()
  endforeach()
endforeach()

if(_violations)
  message(FATAL_ERROR "tunableop layers: includes that cross a layer boundary (docs/design.md, Layout):\n${_violations}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
