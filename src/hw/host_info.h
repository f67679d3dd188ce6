#pragma once
// Reading the host a node's GPUs sit in: logical CPUs, memory, NUMA nodes, CPU model, and the
// NUMA node of a PCI device. Linux only; the roots are parameters so tests use a fake tree.

#include <string>

#include "hw/device.h"

namespace gpugeek::hw {

struct HostPaths {
  std::string proc_root = "/proc";  // holds meminfo, cpuinfo
  std::string sys_root = "/sys";    // holds devices/system/node, bus/pci/devices
};

// Reads the host. Never fails: a field that cannot be read keeps its default (cpu_cores falls
// back to sysconf(_SC_NPROCESSORS_ONLN) only when `paths` are the real roots; numa_nodes to 1).
// Sources: /proc/cpuinfo ("processor" lines, "model name"), /proc/meminfo (MemTotal, kB),
// /sys/devices/system/node/node<N>, gethostname(2).
HostInfo ReadHostInfo(const HostPaths& paths = {});

// The NUMA node of PCI device `bus_id` ("dddd:bb:dd.f", any case, domain of 4 or 8 hex digits)
// from <sys_root>/bus/pci/devices/<bus_id>/numa_node; -1 when unknown (the kernel also writes -1
// on single-node hosts).
int ReadPciNumaNode(const std::string& bus_id, const HostPaths& paths = {});

// Normalises a PCI bus id to the sysfs form "dddd:bb:dd.f" in lower case: NVML's
// "00000000:1A:00.0" becomes "0000:1a:00.0". Returns the input lower-cased if it does not parse.
std::string NormalizePciBusId(const std::string& bus_id);

}  // namespace gpugeek::hw
