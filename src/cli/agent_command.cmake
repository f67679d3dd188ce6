# `gpugeek agent --metrics-listen` and `gpugeek up --agent-metrics-listen`: the built binary serving the
# agent's /metrics and announcing it at registration, against an in-process stub of the agent endpoints.
gpugeek_test(cli_agent_command_test
  SOURCES agent_command_test.cc
  DEPS gpugeek::http gpugeek::api
  LABELS integration)
target_compile_definitions(cli_agent_command_test PRIVATE GPUGEEK_BINARY="$<TARGET_FILE:gpugeek>")
add_dependencies(cli_agent_command_test gpugeek)
