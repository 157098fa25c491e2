# install.cmake: what `cmake --install` puts where (GNUInstallDirs under
# CMAKE_INSTALL_PREFIX), the same for the Debian package (prefix /usr).
#
#   <libdir>/mosquitto-chat/mosquitto_chat.so     the plugin
#   <bindir>/mqchat                               the command-line client
#   <bindir>/mqchat-store                         the offline store tool
#   <libdir>/libmosquitto-chat-client.{so,a}      the client library
#   <includedir>/mosquitto-chat/chat_client.h     its public header
#   <libdir>/pkgconfig/mosquitto-chat-client.pc
#   <docdir>/                                     README, docs/, the example app,
#                                                 prometheus-mqtt-exporter.yaml
#   <sysconfdir>/mosquitto/conf.d/mosquitto-chat.conf
#                                                 loads the plugin; sysconfdir
#                                                 is /etc for the prefix /usr
#
# The pkg-config file and the conf snippet name installed paths, so they are
# written at install time, from the prefix in force then (`cmake --install
# --prefix`, or CPack's /usr), not the one configured.

install(TARGETS mosquitto_chat LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/mosquitto-chat)
install(TARGETS mqchat-store RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(CHAT_BUILD_CLIENTS)
  install(TARGETS mqchat RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(TARGETS chat_client chat_client_shared
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/clients/include/chat_client.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mosquitto-chat)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/protocol.md
              ${PROJECT_SOURCE_DIR}/docs/client.md ${PROJECT_SOURCE_DIR}/docs/install.md
              ${PROJECT_SOURCE_DIR}/docs/prometheus-mqtt-exporter.yaml
              ${PROJECT_SOURCE_DIR}/packaging/deb/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/examples/chat_example/CMakeLists.txt
              ${PROJECT_SOURCE_DIR}/examples/chat_example/example.c
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/chat_example)

install(CODE "
  set(CHAT_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(CHAT_BINARY_DIR \"${PROJECT_BINARY_DIR}\")
  set(CHAT_VERSION \"${PROJECT_VERSION}\")
  set(CHAT_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CHAT_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(CHAT_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
  set(CHAT_WITH_CLIENTS \"${CHAT_BUILD_CLIENTS}\")
")
install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/install-time.cmake)
