# install.cmake: what `cmake --install` puts where (GNUInstallDirs under
# CMAKE_INSTALL_PREFIX), the same for the Debian package (prefix /usr).
#
#   <libdir>/mosquitto-chat/mosquitto_chat.so     the plugin
#   <bindir>/mqchat                               the command-line client
#   <bindir>/mqchat-store                         the offline store tool
#   <libdir>/libmosquitto-chat-client.{so,a}      the client library
#   <includedir>/mosquitto-chat/chat_client.h     its public header
#   <libdir>/pkgconfig/mosquitto-chat-client.pc
#   <docdir>/                                     README.md, docs/ (with its
#                                                 images and
#                                                 prometheus-mqtt-exporter.yaml),
#                                                 the example app, and what
#                                                 they link to (mosquitto.conf,
#                                                 fuzz/README.md, the header),
#                                                 at the paths they have in the
#                                                 checkout, so every link holds
#   <datadir>/mosquitto-chat/web/                 the web page and its MQTT.js
#                                                 (when scripts/web-deps put it
#                                                 there before configuring)
#   <datadir>/mosquitto-chat/mosquitto-chat-web.conf
#                                                 the page's listener snippet,
#                                                 off until copied to conf.d
#   <sysconfdir>/mosquitto/conf.d/00-mosquitto-chat.conf
#                                                 loads the plugin; sysconfdir
#                                                 is /etc for the prefix /usr;
#                                                 "00-" so that an include_dir,
#                                                 read in name order, loads it
#                                                 before other plugins
#
# The pkg-config file and the conf snippets name installed paths, so they are
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
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/mosquitto.conf
              ${PROJECT_SOURCE_DIR}/packaging/deb/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Every document, where README.md's and each other's links expect it
# (tests/install.sh and tests/package.sh follow every link).
file(GLOB chat_docs ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/docs/*.png
     ${PROJECT_SOURCE_DIR}/docs/*.yaml)
install(FILES ${chat_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES ${PROJECT_SOURCE_DIR}/fuzz/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/fuzz)
install(FILES ${PROJECT_SOURCE_DIR}/clients/include/chat_client.h
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/clients/include)

# The web page (docs/web.md), served by the broker once its listener snippet
# is copied into conf.d. MQTT.js's browser bundle is not in git:
# scripts/web-deps copies it next to the page, and the package needs it.
set(chat_web ${PROJECT_SOURCE_DIR}/clients/web)
set(CHAT_WEB_BUNDLE ${chat_web}/vendor/mqtt.min.js)
install(FILES ${chat_web}/index.html ${chat_web}/chat.css ${chat_web}/config.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/mosquitto-chat/web)
file(GLOB chat_web_js ${chat_web}/js/*.js)
install(FILES ${chat_web_js} DESTINATION ${CMAKE_INSTALL_DATADIR}/mosquitto-chat/web/js)
if(EXISTS ${CHAT_WEB_BUNDLE})
  install(FILES ${CHAT_WEB_BUNDLE} DESTINATION ${CMAKE_INSTALL_DATADIR}/mosquitto-chat/web/vendor)
else()
  message(WARNING "${CHAT_WEB_BUNDLE} is missing: the web page is installed without MQTT.js "
                  "(run scripts/web-deps, then configure again)")
endif()
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
  set(CHAT_DATADIR \"${CMAKE_INSTALL_DATADIR}\")
  set(CHAT_WITH_CLIENTS \"${CHAT_BUILD_CLIENTS}\")
")
install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/install-time.cmake)
