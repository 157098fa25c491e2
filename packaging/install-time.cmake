# install-time.cmake: run by `cmake --install` (and by CPack) after the
# CHAT_* variables of install.cmake were set; writes the files that name
# installed paths, from the CMAKE_INSTALL_PREFIX of this installation.

# A GNUInstallDirs directory (relative, or absolute) under the prefix.
function(chat_full_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

chat_full_path(CHAT_FULL_LIBDIR "${CHAT_LIBDIR}")
chat_full_path(CHAT_FULL_INCLUDEDIR "${CHAT_INCLUDEDIR}")
chat_full_path(CHAT_DOC_DIR "${CHAT_DOCDIR}")
chat_full_path(CHAT_DATA_DIR "${CHAT_DATADIR}")
set(CHAT_WEB_DIR "${CHAT_DATA_DIR}/mosquitto-chat/web")
set(CHAT_WEB_CONF "${CHAT_DATA_DIR}/mosquitto-chat/mosquitto-chat-web.conf")
set(CHAT_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CHAT_PLUGIN_PATH "${CHAT_FULL_LIBDIR}/mosquitto-chat/mosquitto_chat.so")
# GNUInstallDirs' rule for sysconfdir: /etc for the prefix /usr, else under
# the prefix. Debian's broker reads /etc/mosquitto/conf.d.
if(CMAKE_INSTALL_PREFIX MATCHES "^/usr/?$")
  set(confdir "/etc/mosquitto/conf.d")
else()
  set(confdir "${CMAKE_INSTALL_PREFIX}/etc/mosquitto/conf.d")
endif()

set(stage "${CHAT_BINARY_DIR}/install-time")
file(MAKE_DIRECTORY "${stage}")
# "00-": Mosquitto reads an include_dir in name order, and the plugin refuses
# to start behind another plugin that answers access checks (dynsec.conf).
configure_file("${CHAT_SOURCE_DIR}/packaging/mosquitto-chat.conf.in"
               "${stage}/00-mosquitto-chat.conf" @ONLY)
file(INSTALL "${stage}/00-mosquitto-chat.conf" DESTINATION "${confdir}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# The name up to 0.1.0. Not deleted (it may hold the user's edits), but a
# broker that reads both loads the plugin twice, and refuses to start. CPack
# installs into an empty staging directory: never there.
if(EXISTS "$ENV{DESTDIR}${confdir}/mosquitto-chat.conf")
  message(WARNING "$ENV{DESTDIR}${confdir}/mosquitto-chat.conf is the snippet's name up to "
                  "0.1.0: move your changes into 00-mosquitto-chat.conf beside it and delete it "
                  "(and any copy of it in /etc/mosquitto/conf.d): a broker that reads both "
                  "loads mosquitto-chat twice and refuses to start")
endif()
# The web page's listener, off: beside the page's files, not in conf.d.
configure_file("${CHAT_SOURCE_DIR}/packaging/mosquitto-chat-web.conf.in"
               "${stage}/mosquitto-chat-web.conf" @ONLY)
file(INSTALL "${stage}/mosquitto-chat-web.conf" DESTINATION "${CHAT_DATA_DIR}/mosquitto-chat"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
if(CHAT_WITH_CLIENTS)
  configure_file("${CHAT_SOURCE_DIR}/packaging/mosquitto-chat-client.pc.in"
                 "${stage}/mosquitto-chat-client.pc" @ONLY)
  file(INSTALL "${stage}/mosquitto-chat-client.pc" DESTINATION "${CHAT_FULL_LIBDIR}/pkgconfig"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()

# Debian's changelog, compressed as Debian wants it: -9, no name or time
# stamp in the gzip header, so the package is reproducible.
execute_process(COMMAND gzip -9 -n -c "${CHAT_SOURCE_DIR}/packaging/deb/changelog"
                OUTPUT_FILE "${stage}/changelog.gz" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip of packaging/deb/changelog failed")
endif()
file(INSTALL "${stage}/changelog.gz" DESTINATION "${CHAT_DOC_DIR}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
