# Writes OUT, a C file defining `const char NAME[]` (NUL-terminated) and `const size_t NAME_len`
# with the bytes of IN. Run as: cmake -DIN=... -DOUT=... -DNAME=... -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUT}" "/* generated from ${IN}; do not edit */\n#include <stddef.h>\n"
     "const char ${NAME}[] = {${body}0x00};\nconst size_t ${NAME}_len = ${len};\n")
