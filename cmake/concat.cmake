# Writes OUT, the files of IN (a ;-separated list) one after another: the query library is one
# Redis Functions library assembled from the per-concern files of queries/.
# Run as: cmake -DIN="a,b" -DOUT=... -P concat.cmake
string(REPLACE "," ";" IN "${IN}")
file(WRITE "${OUT}.tmp" "")
foreach(f ${IN})
  file(READ "${f}" text)
  file(APPEND "${OUT}.tmp" "${text}")
endforeach()
file(RENAME "${OUT}.tmp" "${OUT}")
