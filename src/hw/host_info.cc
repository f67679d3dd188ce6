#include "hw/host_info.h"

#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace gpugeek::hw {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

HostInfo ReadHostInfo(const HostPaths& paths) {
  HostInfo host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;

  std::ifstream cpuinfo(paths.proc_root + "/cpuinfo");
  std::string line;
  int processors = 0;
  while (std::getline(cpuinfo, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = Trim(line.substr(0, colon));
    if (key == "processor") ++processors;
    if (key == "model name" && host.cpu_model.empty()) host.cpu_model = Trim(line.substr(colon + 1));
  }
  host.cpu_cores = processors;
  if (host.cpu_cores == 0 && paths.proc_root == "/proc") {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    host.cpu_cores = online > 0 ? static_cast<int>(online) : 0;
  }

  std::ifstream meminfo(paths.proc_root + "/meminfo");
  while (std::getline(meminfo, line)) {
    uint64_t kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %" SCNu64 " kB", &kib) == 1) {
      host.memory_bytes = kib * 1024;  // /proc/meminfo's "kB" is KiB
      break;
    }
  }

  std::error_code ec;
  int nodes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(paths.sys_root + "/devices/system/node", ec)) {
    std::string leaf = entry.path().filename().string();
    if (leaf.size() > 4 && leaf.starts_with("node") && std::isdigit(static_cast<unsigned char>(leaf[4]))) ++nodes;
  }
  host.numa_nodes = nodes > 0 ? nodes : 1;
  return host;
}

std::string NormalizePciBusId(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  int consumed = 0;
  // sscanf's %x would also accept a "0x" prefix, so the text must be hex digits and separators only.
  bool plain = bus_id.find_first_of("xX") == std::string::npos;
  if (plain && std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &device, &function, &consumed) == 4 &&
      consumed == static_cast<int>(bus_id.size()) && bus <= 0xff && device <= 0x1f && function <= 7) {
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
  }
  std::string lower = bus_id;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

int ReadPciNumaNode(const std::string& bus_id, const HostPaths& paths) {
  std::ifstream in(paths.sys_root + "/bus/pci/devices/" + NormalizePciBusId(bus_id) + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node < 0 ? -1 : node;
}

}  // namespace gpugeek::hw
