# `gpugeek top` (top_command.cc): the pool at a glance through the REST API, drawn with ncurses. Its screen
# is a pure function (top_view.cc), unit-tested on its own; the command is tested end to end under a
# pseudo-terminal against a real server and agents.
find_package(Curses REQUIRED)
target_sources(gpugeek PRIVATE top_command.cc top_view.cc)
target_include_directories(gpugeek PRIVATE ${CURSES_INCLUDE_DIRS})
target_link_libraries(gpugeek PRIVATE ${CURSES_LIBRARIES})

gpugeek_test(cli_top_view_test
  SOURCES top_view_test.cc top_view.cc client.cc config.cc
  DEPS gpugeek::api gpugeek::http absl::time CLI11::CLI11)

gpugeek_test(cli_top_command_test
  SOURCES top_command_test.cc
  DEPS gpugeek::http util
  LABELS integration)
target_compile_definitions(cli_top_command_test PRIVATE GPUGEEK_BINARY="$<TARGET_FILE:gpugeek>")
add_dependencies(cli_top_command_test gpugeek)
