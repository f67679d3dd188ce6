#pragma once
// The screen of `gpugeek top` as a pure function: the pool's data (GET /v1/nodes, /v1/pool, /v1/jobs, as
// one JSON object) plus a width and height -> the lines of text to show. No I/O, no clock, no terminal:
// top_command.cc fetches the data and draws these lines (ncurses, or plain text with --once).
//
// Layout, top to bottom:
//   gpugeek top  SERVER  TIME  [hint]
//   nodes U/N up  GPUs A/G allocated  milli-GPU M/T  FGD frag R% (policy P)  pending J
//   ! ERROR                                       (only when the last refresh failed)
//
//   nodes table     NODE STATE CAPACITY GPUS MILLI-GPU
//
//   GPU table       per node a title line, then each GPU: utilisation bar, memory bar, temp, power, health,
//                   and the SCHEDULED / RUNNING jobs on it
//
//   jobs table      ID NAME STATE TENANT GPUS NODES AGE; RUNNING, SCHEDULED, PENDING first, then the
//                   finished ones, most recently updated first
//
//   services table  (when the data has "services": GET /v1/services) SERVICE VERSION WEIGHT REQUESTS SHARE
//                   REPLICAS READY: the configured split beside the one the gateways observed
// Every line is cut to `width`. When the tables do not fit in `height`, each keeps its header and the rows
// are shared out one at a time between the tables; a table that lost rows ends in "+N more ...".

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"

namespace gpugeek::cli {

struct TopScreen {
  std::string server;  // the server URL, shown in the title line
  std::string clock;   // the time of the data, as shown (the caller formats it, e.g. local time)
  TimePoint now;       // for the jobs' ages
  // {"nodes": [...], "pool": {...}, "jobs": [...]}: the `nodes` list of GET /v1/nodes, GET /v1/pool, and the
  // jobs of GET /v1/jobs. Null before the first successful refresh.
  nlohmann::json data;
  std::string error;  // why the last refresh failed; empty when it succeeded
  std::string hint;   // appended to the title line, e.g. "q: quit"; may be empty
};

// The lines of the screen. width <= 0: lines are not cut; height <= 0: every row is shown.
std::vector<std::string> RenderTop(const TopScreen& screen, int width, int height);

// A bar of `cells` cells for a percentage (clamped to 0..100), rounded to the nearest cell:
// Bar(62, 10) = "[||||||    ]".
std::string Bar(double percent, int cells);

// A job's age from its creation time, e.g. "42s", "5m", "3h", "2d"; "-" when it does not parse.
std::string Age(const std::string& server_time, TimePoint now);

}  // namespace gpugeek::cli
