# man_commands.cmake - writes the COMMANDS section of charter(1) for help2man (--include) from
# the built CLI itself: `charter help --commands`, then `charter help COMMAND` for each, so the
# page shows every command's usage, options and example exactly as the program prints them.
# Use: cmake -DCHARTER=<path of charter> -DOUT=<file.h2m> -P man_commands.cmake
execute_process(COMMAND ${CHARTER} help --commands OUTPUT_VARIABLE names RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "charter help --commands failed (${rc})")
endif()
string(REGEX REPLACE "\n$" "" names "${names}")
string(REPLACE "\n" ";" names "${names}")
set(text "[COMMANDS]\n")
foreach(name IN LISTS names)
  execute_process(COMMAND ${CHARTER} help ${name} OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "charter help ${name} failed (${rc})")
  endif()
  # roff: backslashes and hyphens escaped, a line starting with . or ' protected.
  string(REPLACE "\\" "\\e" help "${help}")
  string(REPLACE "-" "\\-" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  string(APPEND text ".SS ${name}\n.nf\n${help}.fi\n")
endforeach()
file(WRITE ${OUT} "${text}")
