/* A fake librocm_smi64 for tests: exports the ROCm SMI functions gpugeek's RocmSmiDiscovery calls,
 * with the same C signatures, and answers from a script named by $GPUGEEK_FAKE_ROCM_SMI_SCRIPT,
 * read anew by every rsmi_init. Directives (see fake_script.h for the syntax):
 *
 *   init error=N            rsmi_init returns status N (e.g. 8: RSMI_STATUS_INIT_ERROR)
 *   driver version=6.7.0    rsmi_version_str_get(RSMI_SW_COMP_DRIVER)
 *   gpu name="AMD Instinct MI300X" unique_id=0x... bdf=0000:0c:00.0 vram_total=BYTES vram_used=BYTES
 *       numa=N busy=PCT temp_edge=MILLI_C temp_junction=MILLI_C power_uw=UW socket_power_uw=UW
 *       ecc_unc=N reserved_pages=N pending_pages=N lost_after=N
 *     lost_after=N: after N busy-percent queries (one per sample) every query of the device
 *     returns RSMI_STATUS_FILE_ERROR, as when its sysfs node vanishes. "na" makes a query return
 *     RSMI_STATUS_NOT_SUPPORTED.
 *   link a=I b=J type=xgmi|pcie hops=N   default: pcie, 2 hops
 *
 * Every device function returns RSMI_STATUS_INIT_ERROR unless rsmi_init succeeded. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fake_script.h"

typedef uint32_t rsmi_status_t;
typedef struct {
  uint32_t major, minor, patch;
  const char* build;
} rsmi_version_t;
typedef struct {
  uint64_t correctable_err, uncorrectable_err;
} rsmi_error_count_t;
typedef struct {
  uint64_t page_address, page_size;
  uint32_t status;
} rsmi_retired_page_record_t;

enum {
  SUCCESS = 0x0,
  INVALID_ARGS = 0x1,
  NOT_SUPPORTED = 0x2,
  FILE_ERROR = 0x3,
  INPUT_OUT_OF_BOUNDS = 0x7,
  INIT_ERROR = 0x8,
  INSUFFICIENT_SIZE = 0xB
};
#define UNKNOWN_ERROR 0xFFFFFFFFu
#define MAX_GPUS 16

typedef struct {
  char name[128];
  long long unique_id, bdf, vram_total, vram_used, numa, busy, temp_edge, temp_junction, power_uw, socket_power_uw;
  long long ecc_unc, reserved_pages, pending_pages, lost_after;
  int samples, lost;
} fake_gpu_t;

static fake_gpu_t g_gpus[MAX_GPUS];
static int g_gpu_count;
static int g_inited;
static char g_driver[64] = "6.7.0";
static int g_link_type[MAX_GPUS][MAX_GPUS]; /* 0 unscripted, 1 pcie, 2 xgmi */
static int g_link_hops[MAX_GPUS][MAX_GPUS];

static long long parse_bdf(const char* s) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (s == NULL || sscanf(s, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return 0;
  return (long long)(((uint64_t)domain << 32) | ((bus & 0xffu) << 8) | ((dev & 0x1fu) << 3) | (fn & 0x7u));
}

static rsmi_status_t load_script(void) {
  memset(g_gpus, 0, sizeof(g_gpus));
  memset(g_link_type, 0, sizeof(g_link_type));
  memset(g_link_hops, 0, sizeof(g_link_hops));
  g_gpu_count = 0;
  const char* path = getenv("GPUGEEK_FAKE_ROCM_SMI_SCRIPT");
  if (path == NULL || *path == '\0') return SUCCESS;
  FILE* f = fopen(path, "r");
  if (f == NULL) return UNKNOWN_ERROR;
  char buf[4096];
  fake_line_t line;
  rsmi_status_t rc = SUCCESS;
  while (fgets(buf, sizeof(buf), f) != NULL) {
    if (!fake_parse_line(buf, &line)) continue;
    if (strcmp(line.word, "init") == 0) {
      rc = (rsmi_status_t)fake_num(&line, "error", SUCCESS);
    } else if (strcmp(line.word, "driver") == 0) {
      fake_copy(g_driver, sizeof(g_driver), fake_get(&line, "version"));
    } else if (strcmp(line.word, "gpu") == 0 && g_gpu_count < MAX_GPUS) {
      fake_gpu_t* g = &g_gpus[g_gpu_count++];
      fake_copy(g->name, sizeof(g->name), fake_get(&line, "name"));
      g->unique_id = fake_num(&line, "unique_id", 0);
      g->bdf = parse_bdf(fake_get(&line, "bdf"));
      g->vram_total = fake_num(&line, "vram_total", 0);
      g->vram_used = fake_num(&line, "vram_used", 0);
      g->numa = fake_num(&line, "numa", 0);
      g->busy = fake_num(&line, "busy", 0);
      g->temp_edge = fake_num(&line, "temp_edge", 30000);
      g->temp_junction = fake_num(&line, "temp_junction", 35000);
      g->power_uw = fake_num(&line, "power_uw", 100000000);
      g->socket_power_uw = fake_num(&line, "socket_power_uw", -1);
      g->ecc_unc = fake_num(&line, "ecc_unc", 0);
      g->reserved_pages = fake_num(&line, "reserved_pages", 0);
      g->pending_pages = fake_num(&line, "pending_pages", 0);
      g->lost_after = fake_num(&line, "lost_after", 0);
    } else if (strcmp(line.word, "link") == 0) {
      long long a = fake_num(&line, "a", -1), b = fake_num(&line, "b", -1);
      if (a < 0 || b < 0 || a >= MAX_GPUS || b >= MAX_GPUS) continue;
      const char* type = fake_get(&line, "type");
      int t = type != NULL && strcmp(type, "xgmi") == 0 ? 2 : 1;
      int hops = (int)fake_num(&line, "hops", t == 2 ? 1 : 2);
      g_link_type[a][b] = g_link_type[b][a] = t;
      g_link_hops[a][b] = g_link_hops[b][a] = hops;
    }
  }
  fclose(f);
  return rc;
}

#define REQUIRE_INIT() \
  if (!g_inited) return INIT_ERROR
#define DEVICE(i)                                             \
  REQUIRE_INIT();                                             \
  if (i >= (uint32_t)g_gpu_count) return INPUT_OUT_OF_BOUNDS; \
  fake_gpu_t* g = &g_gpus[i];                                 \
  if (g->lost) return FILE_ERROR
#define VALUE(field, out)                 \
  if (g->field < 0) return NOT_SUPPORTED; \
  *(out) = g->field;                      \
  return SUCCESS

rsmi_status_t rsmi_init(uint64_t flags) {
  (void)flags;
  rsmi_status_t rc = load_script();
  if (rc != SUCCESS) return rc;
  g_inited = 1;
  return SUCCESS;
}

rsmi_status_t rsmi_shut_down(void) {
  REQUIRE_INIT();
  g_inited = 0;
  return SUCCESS;
}

rsmi_status_t rsmi_status_string(rsmi_status_t status, const char** text) {
  if (text == NULL) return INVALID_ARGS;
  switch (status) {
    case SUCCESS:
      *text = "RSMI_STATUS_SUCCESS: The function has been executed successfully.";
      break;
    case NOT_SUPPORTED:
      *text = "RSMI_STATUS_NOT_SUPPORTED: The function is not supported.";
      break;
    case FILE_ERROR:
      *text = "RSMI_STATUS_FILE_ERROR: Problem accessing a file.";
      break;
    case INIT_ERROR:
      *text = "RSMI_STATUS_INIT_ERROR: An error occurred during initialization.";
      break;
    default:
      *text = "RSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred.";
      break;
  }
  return SUCCESS;
}

rsmi_status_t rsmi_version_get(rsmi_version_t* v) {
  v->major = 7;
  v->minor = 3;
  v->patch = 0;
  v->build = "fake";
  return SUCCESS;
}

rsmi_status_t rsmi_version_str_get(uint32_t component, char* out, uint32_t len) {
  REQUIRE_INIT();
  if (component != 0) return INVALID_ARGS;
  if (strlen(g_driver) + 1 > len) return INSUFFICIENT_SIZE;
  strcpy(out, g_driver);
  return SUCCESS;
}

rsmi_status_t rsmi_num_monitor_devices(uint32_t* n) {
  REQUIRE_INIT();
  *n = (uint32_t)g_gpu_count;
  return SUCCESS;
}

rsmi_status_t rsmi_dev_name_get(uint32_t i, char* name, size_t len) {
  DEVICE(i);
  if (strlen(g->name) + 1 > len) return INSUFFICIENT_SIZE;
  strcpy(name, g->name);
  return SUCCESS;
}

rsmi_status_t rsmi_dev_unique_id_get(uint32_t i, uint64_t* id) {
  DEVICE(i);
  if (g->unique_id == 0) return NOT_SUPPORTED;
  *id = (uint64_t)g->unique_id;
  return SUCCESS;
}

rsmi_status_t rsmi_dev_pci_id_get(uint32_t i, uint64_t* bdf) {
  DEVICE(i);
  *bdf = (uint64_t)g->bdf;
  return SUCCESS;
}

rsmi_status_t rsmi_dev_memory_total_get(uint32_t i, uint32_t type, uint64_t* total) {
  DEVICE(i);
  if (type != 0) return NOT_SUPPORTED;
  VALUE(vram_total, total);
}

rsmi_status_t rsmi_dev_memory_usage_get(uint32_t i, uint32_t type, uint64_t* used) {
  DEVICE(i);
  if (type != 0) return NOT_SUPPORTED;
  VALUE(vram_used, used);
}

rsmi_status_t rsmi_topo_get_numa_node_number(uint32_t i, uint32_t* numa) {
  DEVICE(i);
  VALUE(numa, numa);
}

rsmi_status_t rsmi_topo_get_link_type(uint32_t a, uint32_t b, uint64_t* hops, uint32_t* type) {
  REQUIRE_INIT();
  if (a >= (uint32_t)g_gpu_count || b >= (uint32_t)g_gpu_count) return INPUT_OUT_OF_BOUNDS;
  int t = g_link_type[a][b];
  *type = t == 0 ? 1 : (uint32_t)t;
  *hops = t == 0 ? 2 : (uint64_t)g_link_hops[a][b];
  return SUCCESS;
}

rsmi_status_t rsmi_dev_busy_percent_get(uint32_t i, uint32_t* busy) {
  DEVICE(i);
  g->samples++;
  if (g->lost_after > 0 && g->samples > g->lost_after) {
    g->lost = 1;
    return FILE_ERROR;
  }
  VALUE(busy, busy);
}

rsmi_status_t rsmi_dev_temp_metric_get(uint32_t i, uint32_t sensor, uint32_t metric, int64_t* temp) {
  DEVICE(i);
  if (metric != 0) return NOT_SUPPORTED;
  if (sensor == 0) {
    VALUE(temp_edge, temp);
  }
  if (sensor == 1) {
    VALUE(temp_junction, temp);
  }
  return NOT_SUPPORTED;
}

rsmi_status_t rsmi_dev_power_ave_get(uint32_t i, uint32_t sensor, uint64_t* power) {
  DEVICE(i);
  if (sensor != 0) return INVALID_ARGS;
  VALUE(power_uw, power);
}

rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t i, uint64_t* power) {
  DEVICE(i);
  VALUE(socket_power_uw, power);
}

rsmi_status_t rsmi_dev_ecc_count_get(uint32_t i, uint32_t block, rsmi_error_count_t* ec) {
  DEVICE(i);
  if (g->ecc_unc < 0) return NOT_SUPPORTED;
  ec->correctable_err = 0;
  /* All uncorrectable errors sit in the memory controller (UMC) block. */
  ec->uncorrectable_err = block == 0x1 ? (uint64_t)g->ecc_unc : 0;
  return SUCCESS;
}

rsmi_status_t rsmi_dev_memory_reserved_pages_get(uint32_t i, uint32_t* num, rsmi_retired_page_record_t* records) {
  DEVICE(i);
  if (num == NULL) return INVALID_ARGS;
  if (g->reserved_pages < 0) return NOT_SUPPORTED;
  uint32_t total = (uint32_t)(g->reserved_pages + g->pending_pages);
  if (records == NULL) {
    *num = total;
    return SUCCESS;
  }
  uint32_t n = *num < total ? *num : total;
  for (uint32_t k = 0; k < n; ++k) {
    records[k].page_address = 0x100000ULL * (k + 1);
    records[k].page_size = 4096;
    records[k].status = k < (uint32_t)g->reserved_pages ? 0 : 1;
  }
  *num = n;
  return n < total ? INSUFFICIENT_SIZE : SUCCESS;
}
