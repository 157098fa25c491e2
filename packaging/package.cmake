# package.cmake: the Debian package, built by `cmake --build <dir> --target
# package` into <dir>/mosquitto-chat_<version>_<arch>.deb. It holds what
# install.cmake installs under /usr, the conf snippet
# /etc/mosquitto/conf.d/00-mosquitto-chat.conf (a conffile), and maintainer
# scripts that create the store directory owned by the broker's user
# (postinst), delete it on purge only (postrm), and rename 0.1.0's snippet
# mosquitto-chat.conf with the operator's edits (preinst, postinst, postrm).
set(CHAT_DEB_MAINTAINER "mosquitto-chat maintainers <maintainers@users.noreply.a-seed-d923033b.example>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mosquitto-chat)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "group chat over MQTT as a Mosquitto plugin")
set(CPACK_PACKAGE_CONTACT "${CHAT_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
# Install with DESTDIR, so that the prefix seen at install time is /usr and
# the snippet lands in /etc (see install-time.cmake).
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CHAT_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; CPack indents these
# lines and turns the empty one into " .".
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "mosquitto-chat gives every message published to chat/<group> a per-group id
(1, 2, 3 ... no gaps), stores one copy of it in LevelDB before the publish is
acknowledged, keeps one cursor per member device and replays what a device
missed when it comes back.

This package loads the plugin into the system broker (restart mosquitto) and
ships mqchat, a command-line client, with the client library.")
# Libraries from dpkg-shlibdeps, the broker by hand: the plugin needs a broker
# with the 2.0 plugin API, which no library dependency expresses.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "mosquitto (>= 2.0)")
# plugin_opt_store postgresql loads libpq5 at run time, and push notifications
# (plugin_opt_push_allow) load libcurl4 (dpkg-shlibdeps cannot see a dlopen).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libpq5, libcurl4")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles
    ${PROJECT_SOURCE_DIR}/packaging/deb/preinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/postrm
    ${PROJECT_SOURCE_DIR}/packaging/deb/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# The changelog's newest entry must be this version (lintian, and users, read it).
file(STRINGS ${PROJECT_SOURCE_DIR}/packaging/deb/changelog chat_changelog_head LIMIT_COUNT 1)
if(NOT chat_changelog_head MATCHES "^mosquitto-chat \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "packaging/deb/changelog starts with '${chat_changelog_head}', "
                      "not version ${PROJECT_VERSION}: add an entry")
endif()

include(CPack)
