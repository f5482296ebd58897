# Writes OUT, the bytes of each file of IN (a |-list) one after the other, in that order: the
# query library Redis loads is its sources (queries/*.lua) concatenated.
# Run as: cmake -DIN="a|b" -DOUT=... -P concat.cmake (| separates, as ; would split the command)
string(REPLACE "|" ";" IN "${IN}")
set(text "")
foreach(f IN LISTS IN)
  file(READ "${f}" part)
  string(APPEND text "${part}")
endforeach()
file(WRITE "${OUT}" "${text}")
