# Writes OUT: a C++ source defining gpugeek::hw::kBuiltinCatalogJson as the bytes of IN.
# Run at build time (add_custom_command) so editing gpu_catalog.json rebuilds the binary.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUT}" "// Generated from gpu_catalog.json by embed_catalog.cmake. Do not edit.\n"
  "namespace gpugeek::hw {\nextern const char kBuiltinCatalogJson[];\n"
  "const char kBuiltinCatalogJson[] = {${bytes} '\\0'};\n}\n")
