/* A fake libnvidia-ml for tests: exports the NVML functions gpugeek's NvmlDiscovery calls, with
 * the same C signatures, and answers from a script named by $GPUGEEK_FAKE_NVML_SCRIPT, read anew
 * by every nvmlInit_v2. Directives (see fake_script.h for the syntax):
 *
 *   init error=N           nvmlInit_v2 returns NVML error N (e.g. 9: driver not loaded)
 *   count error=N          nvmlDeviceGetCount_v2 returns error N
 *   driver version=550.54.15 cuda=12040
 *   gpu name="NVIDIA H100 80GB HBM3" uuid=GPU-... bus=00000000:18:00.0 mem_total=BYTES
 *       mem_used=BYTES numa=N util=PCT temp=C power_mw=MW ecc_unc=N retired_sbe=N retired_dbe=N
 *       pending=0|1 switch_links=N lost_after=N xid=CODE uuid_error=N
 *     lost_after=N: after N utilisation queries (one per sample), every query of the device
 *     returns NVML_ERROR_GPU_IS_LOST. xid=CODE: one XID critical-error event, delivered by the
 *     first nvmlEventSetWait_v2 after the device registered for it; with xid_when=PATH, by the first
 *     one after the file PATH exists (a test raises the XID at the moment it chooses). Any numeric value "na"
 *     makes that query return NVML_ERROR_NOT_SUPPORTED.
 *   nvlink a=I b=J links=N  N direct NVLink links between GPUs I and J
 *   path a=I b=J level=L    nvmlDeviceGetTopologyCommonAncestor level (0,10,20,30,40,50);
 *                           default 40 (NODE) for the same NUMA node, else 50 (SYS)
 *
 * Every device function returns NVML_ERROR_UNINITIALIZED unless nvmlInit_v2 succeeded and
 * nvmlShutdown has not undone it, as the real library does. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_script.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

enum {
  OK = 0,
  UNINITIALIZED = 1,
  INVALID_ARGUMENT = 2,
  NOT_SUPPORTED = 3,
  INSUFFICIENT_SIZE = 7,
  TIMEOUT = 10,
  GPU_IS_LOST = 15,
  UNKNOWN = 999
};
#define MAX_GPUS 16
#define MAX_LINKS 18
#define XID_EVENT 0x8ULL

struct nvmlDevice_st {
  char name[96], uuid[96], bus[32], xid_when[256];
  long long mem_total, mem_used, numa, util, temp, power_mw, ecc_unc, retired_sbe, retired_dbe, pending;
  long long lost_after, xid, uuid_error;
  int samples, lost, registered, xid_delivered;
  int link_count;
  int link_remote_type[MAX_LINKS]; /* 0 GPU, 2 switch */
  char link_remote_bus[MAX_LINKS][32];
};
struct nvmlEventSet_st {
  int unused;
};

static struct nvmlDevice_st g_gpus[MAX_GPUS];
static int g_gpu_count;
static int g_init_refs;
static int g_count_error;
static char g_driver[80] = "550.54.15";
static int g_cuda = 12040;
static int g_level[MAX_GPUS][MAX_GPUS]; /* 0 unless scripted: then level + 1 */
static struct nvmlEventSet_st g_event_set;

static int load_script(void) {
  memset(g_gpus, 0, sizeof(g_gpus));
  memset(g_level, 0, sizeof(g_level));
  g_gpu_count = 0;
  g_count_error = 0;
  const char* path = getenv("GPUGEEK_FAKE_NVML_SCRIPT");
  if (path == NULL || *path == '\0') return OK;
  FILE* f = fopen(path, "r");
  if (f == NULL) return UNKNOWN;
  char buf[4096];
  fake_line_t line;
  int rc = OK;
  while (fgets(buf, sizeof(buf), f) != NULL) {
    if (!fake_parse_line(buf, &line)) continue;
    if (strcmp(line.word, "init") == 0) {
      rc = (int)fake_num(&line, "error", OK);
    } else if (strcmp(line.word, "count") == 0) {
      g_count_error = (int)fake_num(&line, "error", OK);
    } else if (strcmp(line.word, "driver") == 0) {
      fake_copy(g_driver, sizeof(g_driver), fake_get(&line, "version"));
      g_cuda = (int)fake_num(&line, "cuda", g_cuda);
    } else if (strcmp(line.word, "gpu") == 0 && g_gpu_count < MAX_GPUS) {
      struct nvmlDevice_st* g = &g_gpus[g_gpu_count++];
      fake_copy(g->name, sizeof(g->name), fake_get(&line, "name"));
      fake_copy(g->uuid, sizeof(g->uuid), fake_get(&line, "uuid"));
      fake_copy(g->bus, sizeof(g->bus), fake_get(&line, "bus"));
      g->mem_total = fake_num(&line, "mem_total", 0);
      g->mem_used = fake_num(&line, "mem_used", 0);
      g->numa = fake_num(&line, "numa", 0);
      g->util = fake_num(&line, "util", 0);
      g->temp = fake_num(&line, "temp", 30);
      g->power_mw = fake_num(&line, "power_mw", 60000);
      g->ecc_unc = fake_num(&line, "ecc_unc", 0);
      g->retired_sbe = fake_num(&line, "retired_sbe", 0);
      g->retired_dbe = fake_num(&line, "retired_dbe", 0);
      g->pending = fake_num(&line, "pending", 0);
      g->lost_after = fake_num(&line, "lost_after", 0);
      g->xid = fake_num(&line, "xid", 0);
      fake_copy(g->xid_when, sizeof(g->xid_when), fake_get(&line, "xid_when"));
      g->uuid_error = fake_num(&line, "uuid_error", 0);
      long long sw = fake_num(&line, "switch_links", 0);
      for (long long k = 0; k < sw && g->link_count < MAX_LINKS; ++k) {
        g->link_remote_type[g->link_count] = 2;
        snprintf(g->link_remote_bus[g->link_count], 32, "00000000:%02X:00.0", (unsigned)(0xC0 + k % 16));
        g->link_count++;
      }
    } else if (strcmp(line.word, "nvlink") == 0) {
      long long a = fake_num(&line, "a", -1), b = fake_num(&line, "b", -1), n = fake_num(&line, "links", 1);
      if (a < 0 || b < 0 || a >= g_gpu_count || b >= g_gpu_count) continue;
      for (long long k = 0; k < n; ++k) {
        struct nvmlDevice_st* ga = &g_gpus[a];
        struct nvmlDevice_st* gb = &g_gpus[b];
        if (ga->link_count < MAX_LINKS) {
          ga->link_remote_type[ga->link_count] = 0;
          fake_copy(ga->link_remote_bus[ga->link_count++], 32, gb->bus);
        }
        if (gb->link_count < MAX_LINKS) {
          gb->link_remote_type[gb->link_count] = 0;
          fake_copy(gb->link_remote_bus[gb->link_count++], 32, ga->bus);
        }
      }
    } else if (strcmp(line.word, "path") == 0) {
      long long a = fake_num(&line, "a", -1), b = fake_num(&line, "b", -1), level = fake_num(&line, "level", 50);
      if (a < 0 || b < 0 || a >= MAX_GPUS || b >= MAX_GPUS) continue;
      g_level[a][b] = g_level[b][a] = (int)level + 1;
    }
  }
  fclose(f);
  return rc;
}

#define REQUIRE_INIT() \
  if (g_init_refs <= 0) return UNINITIALIZED
#define DEVICE(d)                                                           \
  REQUIRE_INIT();                                                           \
  if (d < &g_gpus[0] || d >= &g_gpus[g_gpu_count]) return INVALID_ARGUMENT; \
  if (d->lost) return GPU_IS_LOST

nvmlReturn_t nvmlInit_v2(void) {
  int rc = load_script();
  if (rc != OK) return rc;
  g_init_refs++;
  return OK;
}

nvmlReturn_t nvmlShutdown(void) {
  REQUIRE_INIT();
  g_init_refs--;
  return OK;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case OK:
      return "Success";
    case UNINITIALIZED:
      return "Uninitialized";
    case INVALID_ARGUMENT:
      return "Invalid Argument";
    case NOT_SUPPORTED:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 9:
      return "Driver Not Loaded";
    case GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  REQUIRE_INIT();
  if (strlen(g_driver) + 1 > length) return INSUFFICIENT_SIZE;
  strcpy(version, g_driver);
  return OK;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  REQUIRE_INIT();
  *v = g_cuda;
  return OK;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  REQUIRE_INIT();
  if (g_count_error != OK) return g_count_error;
  *count = (unsigned int)g_gpu_count;
  return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  REQUIRE_INIT();
  if (index >= (unsigned int)g_gpu_count) return INVALID_ARGUMENT;
  *device = &g_gpus[index];
  return OK;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  DEVICE(d);
  if (strlen(d->name) + 1 > length) return INSUFFICIENT_SIZE;
  strcpy(name, d->name);
  return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  DEVICE(d);
  if (d->uuid_error != 0) return (nvmlReturn_t)d->uuid_error;
  if (strlen(d->uuid) + 1 > length) return INSUFFICIENT_SIZE;
  strcpy(uuid, d->uuid);
  return OK;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  DEVICE(d);
  memset(pci, 0, sizeof(*pci));
  fake_copy(pci->busId, sizeof(pci->busId), d->bus);
  sscanf(d->bus, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
  return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* mem) {
  DEVICE(d);
  mem->total = (unsigned long long)d->mem_total;
  mem->used = (unsigned long long)d->mem_used;
  mem->free = mem->total - mem->used;
  return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int size, unsigned long* set, unsigned int scope) {
  DEVICE(d);
  if (size == 0 || set == NULL || scope != 0) return INVALID_ARGUMENT;
  if (d->numa < 0) return NOT_SUPPORTED;
  memset(set, 0, size * sizeof(*set));
  set[0] = 1UL << d->numa;
  return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int* active) {
  DEVICE(d);
  if (link >= MAX_LINKS) return INVALID_ARGUMENT;
  if (d->link_count == 0) return NOT_SUPPORTED;
  *active = link < (unsigned int)d->link_count ? 1 : 0;
  return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int* type) {
  DEVICE(d);
  if (link >= (unsigned int)d->link_count) return INVALID_ARGUMENT;
  *type = d->link_remote_type[link];
  return OK;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t* pci) {
  DEVICE(d);
  if (link >= (unsigned int)d->link_count) return INVALID_ARGUMENT;
  memset(pci, 0, sizeof(*pci));
  fake_copy(pci->busId, sizeof(pci->busId), d->link_remote_bus[link]);
  return OK;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  DEVICE(a);
  DEVICE(b);
  int ia = (int)(a - g_gpus), ib = (int)(b - g_gpus);
  if (g_level[ia][ib] != 0) {
    *level = g_level[ia][ib] - 1;
  } else {
    *level = a->numa == b->numa ? 40 : 50;
  }
  return OK;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  DEVICE(d);
  d->samples++;
  if (d->lost_after > 0 && d->samples > d->lost_after) {
    d->lost = 1;
    return GPU_IS_LOST;
  }
  if (d->util < 0) return NOT_SUPPORTED;
  u->gpu = (unsigned int)d->util;
  u->memory = 0;
  return OK;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int* temp) {
  DEVICE(d);
  if (sensor != 0) return INVALID_ARGUMENT;
  if (d->temp < 0) return NOT_SUPPORTED;
  *temp = (unsigned int)d->temp;
  return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* mw) {
  DEVICE(d);
  if (d->power_mw < 0) return NOT_SUPPORTED;
  *mw = (unsigned int)d->power_mw;
  return OK;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long* count) {
  DEVICE(d);
  if (type < 0 || type > 1 || counter < 0 || counter > 1) return INVALID_ARGUMENT;
  if (d->ecc_unc < 0) return NOT_SUPPORTED;
  *count = type == 1 ? (unsigned long long)d->ecc_unc : 0;
  return OK;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int* count, unsigned long long* addresses) {
  DEVICE(d);
  long long n = cause == 0 ? d->retired_sbe : cause == 1 ? d->retired_dbe : -2;
  if (n == -2) return INVALID_ARGUMENT;
  if (n < 0) return NOT_SUPPORTED;
  if (*count < (unsigned int)n) {
    *count = (unsigned int)n;
    return INSUFFICIENT_SIZE;
  }
  for (long long k = 0; addresses != NULL && k < n; ++k) addresses[k] = 0x1000ULL * (unsigned long long)(k + 1);
  *count = (unsigned int)n;
  return OK;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int* pending) {
  DEVICE(d);
  if (d->pending < 0) return NOT_SUPPORTED;
  *pending = d->pending ? 1 : 0;
  return OK;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  REQUIRE_INIT();
  *set = &g_event_set;
  return OK;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  (void)set;
  return OK;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long* types) {
  DEVICE(d);
  *types = XID_EVENT | 0x1ULL | 0x2ULL;
  return OK;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
  DEVICE(d);
  if (set != &g_event_set) return INVALID_ARGUMENT;
  if (types & XID_EVENT) d->registered = 1;
  return OK;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  REQUIRE_INIT();
  (void)timeout_ms;
  if (set != &g_event_set) return INVALID_ARGUMENT;
  for (int i = 0; i < g_gpu_count; ++i) {
    struct nvmlDevice_st* g = &g_gpus[i];
    if (g->registered && g->xid > 0 && !g->xid_delivered &&
        (g->xid_when[0] == '\0' || access(g->xid_when, F_OK) == 0)) {
      g->xid_delivered = 1;
      memset(data, 0, sizeof(*data));
      data->device = g;
      data->eventType = XID_EVENT;
      data->eventData = (unsigned long long)g->xid;
      data->gpuInstanceId = 0xFFFFFFFFu;
      data->computeInstanceId = 0xFFFFFFFFu;
      return OK;
    }
  }
  return TIMEOUT;
}
