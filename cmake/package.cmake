# package.cmake - what an operator installs besides the library: charter-bench, man pages made
# from each program's --help (help2man, so they cannot drift from it), bash completion, the
# systemd units and redis.conf; and the Debian package (cpack -G DEB) of the whole tree.

if(TARGET charter-bench)
  install(TARGETS charter-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# --- man pages: charter(1), charter-bench(1), charterd(8), each from the program's --help ---
find_program(HELP2MAN help2man REQUIRED)
set(CHARTER_MAN_DIR ${CMAKE_CURRENT_BINARY_DIR}/man)
file(MAKE_DIRECTORY ${CHARTER_MAN_DIR})
# charter(1) also gets a COMMANDS section written from `charter help COMMAND` of every command.
add_custom_command(
  OUTPUT ${CHARTER_MAN_DIR}/charter-commands.h2m
  COMMAND ${CMAKE_COMMAND} -DCHARTER=$<TARGET_FILE:charter_cli>
          -DOUT=${CHARTER_MAN_DIR}/charter-commands.h2m
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/man_commands.cmake
  DEPENDS charter_cli ${CMAKE_CURRENT_SOURCE_DIR}/cmake/man_commands.cmake
  COMMENT "charter help COMMAND -> man page section" VERBATIM)
function(charter_man target program section summary)
  set(out ${CHARTER_MAN_DIR}/${program}.${section})
  set(extra "")
  if(program STREQUAL "charter")
    set(extra --include=${CHARTER_MAN_DIR}/charter-commands.h2m)
  endif()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=${section}
            --version-string=${PROJECT_VERSION} --name=${summary}
            --include=${CMAKE_CURRENT_SOURCE_DIR}/deploy/man/${program}.h2m ${extra}
            --output=${out} $<TARGET_FILE:${target}>
    DEPENDS ${target} ${CMAKE_CURRENT_SOURCE_DIR}/deploy/man/${program}.h2m
            $<$<STREQUAL:${program},charter>:${CHARTER_MAN_DIR}/charter-commands.h2m>
    COMMENT "help2man ${program}.${section}" VERBATIM)
  add_custom_target(man_${program} ALL DEPENDS ${out})
  install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endfunction()
charter_man(charterd charterd 8 "decide whether an AI agent's action may happen, and record why")
charter_man(charter_cli charter 1 "command-line client of charterd")
if(TARGET charter-bench)
  charter_man(charter-bench charter-bench 1 "start charterd processes and measure them under load")
endif()

# --- bash completion, systemd units, redis.conf -------------------------------------------
install(FILES deploy/charter.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME charter)
install(FILES deploy/redis.conf DESTINATION ${CMAKE_INSTALL_DATADIR}/charter)
# The units in deploy/ name the Debian paths (/usr/bin, /usr/share/charter); installed under
# another prefix they are rewritten to name that prefix's paths, at install time, so
# `cmake --install build --prefix DIR` needs no reconfiguring.
set(CHARTER_UNIT_DIR lib/systemd/system)
foreach(unit charterd.service charter-redis.service)
  install(CODE "
    set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
    file(READ \"${CMAKE_CURRENT_SOURCE_DIR}/deploy/${unit}\" text)
    string(REPLACE \"/usr/bin/charterd\" \"\${prefix}/${CMAKE_INSTALL_BINDIR}/charterd\" text \"\${text}\")
    string(REPLACE \"/usr/share/charter/\" \"\${prefix}/${CMAKE_INSTALL_DATADIR}/charter/\" text \"\${text}\")
    file(WRITE \"${CMAKE_CURRENT_BINARY_DIR}/units/${unit}\" \"\${text}\")
    file(INSTALL DESTINATION \"\${prefix}/${CHARTER_UNIT_DIR}\" TYPE FILE
         FILES \"${CMAKE_CURRENT_BINARY_DIR}/units/${unit}\")")
endforeach()

# --- the Debian package ----------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME charter)
set(CPACK_PACKAGE_VENDOR "charter")
set(CPACK_PACKAGE_CONTACT "charter maintainers <charter@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "decides whether an AI agent's action may happen, and records why")
set(CPACK_PACKAGE_DESCRIPTION
    "charterd serves charter.v1 (protobuf over NNG) from a Redis graph: an input gate over \
artifact ancestry and a delivery gate over delegation chains, every decision recorded with its \
facts and replayable. Includes the charter CLI, libcharter with its headers, pkg-config and \
CMake files, man pages, systemd units and the reference workflows.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libnng1, libhiredis0.14, libprotobuf-c1, libjansson4, libssl3, libcurl4, libsystemd0, \
libmicrohttpd12, libnghttp2-14, redis-server (>= 5:7.0), adduser, openssl, libc6")
# RediSearch serves Retrieval (charter-redis.service loads it when installed).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "redis-redisearch")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "jq")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postinst
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/prerm
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/postrm
    ${CMAKE_CURRENT_SOURCE_DIR}/deploy/debian/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# libcharter's shlibs file and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_STRIP_FILES ON)
include(CPack)
