# The selection table of coll gpuwire (gpuwire/coll_select.h): which
# algorithm a blocking collective on device buffers runs, per topology and
# size. The shipped table, select_table.txt (measured by
# ci/gpu_coll_select.sh), is compiled in as a string (shipped_table.cpp,
# generated here, again whenever the file changes): coll gpuwire and
# gpuwire-info read the core's one copy (gw_sel_load_shipped).
set(_gw_sel_txt ${CMAKE_CURRENT_LIST_DIR}/select_table.txt)
set(_gw_sel_cpp ${CMAKE_CURRENT_BINARY_DIR}/select/shipped_table.cpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_gw_sel_txt})
file(READ ${_gw_sel_txt} _gw_sel)
string(REPLACE "\\" "\\\\" _gw_sel "${_gw_sel}")
string(REPLACE "\"" "\\\"" _gw_sel "${_gw_sel}")
string(REPLACE "\n" "\\n\"\n    \"" _gw_sel "${_gw_sel}")
# Written aside, then copied only when it differs: an unchanged table
# rebuilds nothing.
file(WRITE ${_gw_sel_cpp}.new
  "// Generated from ucx_glue/coll/select/select_table.txt: do not edit.\n"
  "namespace gpuwire::coll {\n"
  "extern const char kShippedSelectTable[];\n"
  "const char kShippedSelectTable[] =\n    \"${_gw_sel}\";\n"
  "}  // namespace gpuwire::coll\n")
configure_file(${_gw_sel_cpp}.new ${_gw_sel_cpp} COPYONLY)
list(APPEND GPUWIRE_COLL_ENGINE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/table.cpp ${_gw_sel_cpp})
