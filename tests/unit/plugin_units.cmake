# The plugin's modules as a static library, and the broker API stubbed
# (plugin_stubs.c) with the fixture that builds a plugin on a real store
# (plugin_fixture.c): what the plugin's unit tests and the fuzzers of fuzz/
# link. Included by tests/unit and fuzz/, whichever comes first defines them.
if(NOT TARGET chat_plugin_units)
  # Every .c of plugin/, so that a module added there links here too; the
  # entry points (plugin.c) only come along where a test calls them.
  file(GLOB chat_plugin_unit_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/plugin/*.c)
  add_library(chat_plugin_units STATIC ${chat_plugin_unit_sources}
                                       ${CMAKE_CURRENT_LIST_DIR}/plugin_stubs.c
                                       ${CMAKE_CURRENT_LIST_DIR}/plugin_fixture.c
                                       ${CMAKE_CURRENT_LIST_DIR}/json_check.c
                                       $<TARGET_OBJECTS:chat_proto>)
  target_include_directories(chat_plugin_units PUBLIC ${PROJECT_SOURCE_DIR}/plugin
                             ${CMAKE_CURRENT_LIST_DIR} ${MOSQ_INC} ${CJSON_INC}
                             $<TARGET_PROPERTY:chat_proto,INTERFACE_INCLUDE_DIRECTORIES>)
  # libmosquitto: the real MQTT 5 property functions and topic checks, as
  # the plugin itself links them.
  find_package(Threads REQUIRED)
  target_link_libraries(chat_plugin_units PUBLIC chat_store ${CJSON_LIB} ${MOSQ_LIB} ${CRYPTO_LIB}
                        Threads::Threads m ${CMAKE_DL_LIBS})
endif()
