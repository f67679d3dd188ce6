#include "controlplane/openapi.h"

#include <cctype>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "common/version.h"
#include "controlplane/access.h"

namespace gpugeek::controlplane {
namespace {

using J = nlohmann::json;

J Ref(const std::string& schema) { return {{"$ref", "#/components/schemas/" + schema}}; }

J JsonResponse(const std::string& description, const J& schema) {
  return {{"description", description}, {"content", {{"application/json", {{"schema", schema}}}}}};
}

J Errors() {
  return {{"400", JsonResponse("invalid input; the message names the field", Ref("Error"))},
          {"404", JsonResponse("not found", Ref("Error"))},
          {"409", JsonResponse("the resource's state forbids it", Ref("Error"))}};
}

J Op(const std::string& summary, const J& ok_response, const std::string& ok_code = "200") {
  J responses = Errors();
  responses[ok_code] = ok_response;
  return {{"summary", summary}, {"responses", responses}};
}

J PathParam(const std::string& name) {
  return {{"name", name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}};
}

J QueryParam(const std::string& name, const std::string& type, const std::string& description) {
  return {
      {"name", name}, {"in", "query"}, {"required", false}, {"description", description}, {"schema", {{"type", type}}}};
}

J Body(const J& schema) { return {{"required", true}, {"content", {{"application/json", {{"schema", schema}}}}}}; }

// The operationId and tag of each route. A route missing here (one added without a row) still gets both,
// derived from its method and path (DerivedOperationId), so the document stays valid; give it a row.
struct OperationName {
  std::string_view method;
  std::string_view pattern;
  std::string_view operation_id;
  std::string_view tag;
};
constexpr OperationName kOperationNames[] = {
    {"GET", "/v1/healthz", "getHealth", "system"},
    {"GET", "/v1/openapi.json", "getOpenApiDocument", "system"},
    {"GET", "/v1/whoami", "whoAmI", "accounts"},
    {"POST", "/v1/jobs", "submitJob", "jobs"},
    {"GET", "/v1/jobs", "listJobs", "jobs"},
    {"GET", "/v1/jobs/{id}", "getJob", "jobs"},
    {"POST", "/v1/jobs/{id}/cancel", "cancelJob", "jobs"},
    {"GET", "/v1/jobs/{id}/logs", "getJobLogs", "jobs"},
    {"POST", "/v1/jobs/{id}/exec", "execInJob", "jobs"},
    {"GET", "/v1/jobs/{id}/ports", "listJobPorts", "jobs"},
    {"POST", "/v1/jobs/{id}/port-forward", "forwardJobPort", "jobs"},
    {"GET", "/v1/events", "listEvents", "jobs"},
    {"GET", "/v1/nodes", "listNodes", "nodes"},
    {"GET", "/v1/nodes/{name}", "getNode", "nodes"},
    {"DELETE", "/v1/nodes/{name}", "removeNode", "nodes"},
    {"POST", "/v1/nodes/{name}/cordon", "cordonNode", "nodes"},
    {"POST", "/v1/nodes/{name}/uncordon", "uncordonNode", "nodes"},
    {"POST", "/v1/nodes/{name}/drain", "drainNode", "nodes"},
    {"POST", "/v1/nodes/{name}/reclaim", "reclaimNode", "nodes"},
    {"GET", "/v1/pool", "getPool", "nodes"},
    {"POST", "/v1/plans", "planTask", "jobs"},
    {"GET", "/v1/tenants", "listTenants", "accounts"},
    {"POST", "/v1/tenants", "createTenant", "accounts"},
    {"GET", "/v1/users", "listUsers", "accounts"},
    {"POST", "/v1/users", "createUser", "accounts"},
    {"GET", "/v1/tokens", "listTokens", "accounts"},
    {"POST", "/v1/tokens", "createToken", "accounts"},
    {"DELETE", "/v1/tokens/{id}", "revokeToken", "accounts"},
    {"GET", "/v1/audit", "listAudit", "audit"},
    {"GET", "/v1/prometheus/targets", "getPrometheusTargets", "system"},
    {"GET", "/metrics", "getMetrics", "system"},
    {"POST", "/v1/agents/register", "registerAgent", "agents"},
    {"POST", "/v1/agents/{node}/heartbeat", "agentHeartbeat", "agents"},
    {"POST", "/v1/agents/{node}/reclaim", "agentReclaimNotice", "agents"},
    {"GET", "/v1/agents/{node}/archives/{digest}", "agentGetArchive", "agents"},
    {"HEAD", "/v1/archives/{digest}", "hasArchive", "archives"},
    {"GET", "/v1/archives/{digest}", "getArchive", "archives"},
    {"PUT", "/v1/archives/{digest}", "uploadArchive", "archives"},
    {"GET", "/v1/datasets", "listDatasets", "datasets"},
    {"GET", "/v1/datasets/{name}", "getDataset", "datasets"},
    {"GET", "/v1/datasets/{name}/versions/{rev}", "getDatasetVersion", "datasets"},
    {"GET", "/v1/datasets/{name}/log", "getDatasetLog", "datasets"},
    {"GET", "/v1/datasets/{name}/diff", "diffDatasetVersions", "datasets"},
    {"PUT", "/v1/datasets/{name}/branches/{branch}", "setDatasetBranch", "datasets"},
    {"PUT", "/v1/datasets/{name}/tags/{tag}", "createDatasetTag", "datasets"},
    {"DELETE", "/v1/datasets/{name}/branches/{branch}", "deleteDatasetBranch", "datasets"},
    {"DELETE", "/v1/datasets/{name}/tags/{tag}", "deleteDatasetTag", "datasets"},
    {"POST", "/v1/dataset-objects/missing", "findMissingDatasetObjects", "datasets"},
    {"PUT", "/v1/dataset-objects/{digest}", "uploadDatasetObject", "datasets"},
    {"GET", "/v1/dataset-objects/{digest}", "getDatasetObject", "datasets"},
    {"GET", "/v1/models", "listModels", "models"},
    {"GET", "/v1/models/{name}", "getModel", "models"},
    {"GET", "/v1/models/{name}/versions/{rev}", "getModelVersion", "models"},
    {"GET", "/v1/models/{name}/log", "getModelLog", "models"},
    {"GET", "/v1/models/{name}/diff", "diffModelVersions", "models"},
    {"PUT", "/v1/models/{name}/branches/{branch}", "setModelBranch", "models"},
    {"PUT", "/v1/models/{name}/tags/{tag}", "createModelTag", "models"},
    {"DELETE", "/v1/models/{name}/branches/{branch}", "deleteModelBranch", "models"},
    {"DELETE", "/v1/models/{name}/tags/{tag}", "deleteModelTag", "models"},
    {"POST", "/v1/model-objects/missing", "findMissingModelObjects", "models"},
    {"PUT", "/v1/model-objects/{digest}", "uploadModelObject", "models"},
    {"POST", "/v1/models/{name}/pulls", "pullModel", "models"},
    {"GET", "/v1/models/{name}/pulls", "getModelPulls", "models"},
    {"GET", "/v1/models/{name}/grants", "getModelGrants", "models"},
    {"PUT", "/v1/models/{name}/grants/{tenant}", "grantModel", "models"},
    {"DELETE", "/v1/models/{name}/grants/{tenant}", "revokeModel", "models"},
    {"GET", "/v1/shared-models", "listSharedModels", "models"},
    {"GET", "/v1/model-objects/{digest}", "getModelObject", "models"},
    {"GET", "/v1/agents/{node}/datasets/{commit}/objects/{digest}", "agentGetDatasetObject", "agents"},
    {"GET", "/v1/agents/{node}/models/{commit}/objects/{digest}", "agentGetModelObject", "agents"},
    {"POST", "/v1/experiments", "createExperiment", "experiments"},
    {"GET", "/v1/experiments", "listExperiments", "experiments"},
    {"GET", "/v1/experiments/{id}", "getExperiment", "experiments"},
    {"GET", "/v1/experiments/{id}/trials/{number}", "getTrial", "experiments"},
    {"GET", "/v1/experiments/{id}/export", "exportExperiment", "experiments"},
    {"POST", "/v1/experiments/{id}/stop", "stopExperiment", "experiments"},
    {"POST", "/v1/services", "applyService", "services"},
    {"GET", "/v1/services", "listServices", "services"},
    {"POST", "/v1/services/load", "reportServiceLoad", "services"},
    {"GET", "/v1/services/{name}", "getService", "services"},
    {"DELETE", "/v1/services/{name}", "deleteService", "services"},
    {"GET", "/v1/services/{name}/replicas", "listServiceReplicas", "services"},
    {"POST", "/v1/services/{name}/traffic", "setServiceTraffic", "services"},
    {"POST", "/v1/services/{name}/scale", "scaleService", "services"},
    {"GET", "/v1/endpoints", "listEndpoints", "services"},
};

// The tags operations are grouped by, with what each holds.
constexpr std::pair<std::string_view, std::string_view> kTags[] = {
    {"jobs", "Submit, list, cancel and plan jobs; their logs and state-change events (tenant-scoped)"},
    {"nodes", "The pool: nodes, their GPUs, cordon, drain and removal"},
    {"accounts", "Tenants, users and API tokens, and who the caller is"},
    {"audit", "The audit log of state-changing calls (admin)"},
    {"system", "Health, this document, metrics and Prometheus service discovery"},
    {"agents", "The agents' own listener: registration, heartbeats and the workdir archives of their jobs"},
    {"archives", "Workdir archives (a job's `workdir:`), content-addressed by SHA-256, per tenant"},
    {"datasets",
     "Dataset versions (a job's `dataset:`): commits of content-addressed chunks and trees, branches "
     "and tags, per tenant"},
    {"models",
     "The model registry: model versions stored like datasets, grants of pull, deploy and fine-tune rights to "
     "other tenants, and the log of every pull"},
    {"experiments",
     "Hyper-parameter experiments: trials run as jobs, sampled by TPE, GP or CMA-ES and stopped early by a "
     "pruner (docs/hpo.md)"},
    {"services",
     "Model services: replicas run as jobs, probed for readiness, split by weight between versions and "
     "scaled on the gateways' load (docs/service-spec.md)"},
};

// method + the path's literal segments in camel case, "By" + its parameters: "postJobsByIdCancel".
std::string DerivedOperationId(std::string_view method, std::string_view pattern) {
  std::string id;
  for (char c : method) id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool upper = true;
  for (char c : pattern) {
    if (c == '/' || c == '{' || c == '}' || c == '.' || c == '-' || c == '_') {
      if (c == '{') id += "By";
      upper = true;
      continue;
    }
    id += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return id;
}

J Build() {
  J schemas;
  schemas["Error"] = {{"type", "object"},
                      {"required", {"code", "message"}},
                      {"properties",
                       {{"code", {{"type", "string"}, {"example", "INVALID_ARGUMENT"}}},
                        {"message", {{"type", "string"}}},
                        {"details", {{"type", "object"}}}}}};
  schemas["Job"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"name", {{"type", "string"}}},
        {"tenant", {{"type", "string"}}},
        {"state",
         {{"type", "string"}, {"enum", {"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}}}},
        {"priority", {{"type", "integer"}}},
        {"reason", {{"type", "string"}}},
        {"epoch", {{"type", "integer"}, {"description", "fencing token, raised on every placement"}}},
        {"restarts", {{"type", "integer"}}},
        {"retries",
         {{"type", "object"},
          {"additionalProperties", {{"type", "integer"}}},
          {"description", "retries used per cause of the job's retry policy (error, node-failure, preemption)"}}},
        {"exit_code", {{"type", "integer"}, {"nullable", true}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"updated_at", {{"type", "string"}, {"format", "date-time"}}},
        {"spec_yaml", {{"type", "string"}}},
        {"plan", {{"type", "object"}, {"nullable", true}}},
        {"allocation", {{"type", "object"}, {"nullable", true}}},
        {"pending_reason", {{"type", "string"}}},
        {"checkpoint",
         {{"type", "object"},
          {"nullable", true},
          {"description",
           "the last checkpoint the workload reported complete (docs/checkpointing.md): what a restart resumes "
           "from; null = none reported"},
          {"properties",
           {{"step", {{"type", "integer"}, {"minimum", 0}}},
            {"reported_at", {{"type", "string"}, {"format", "date-time"}}},
            {"region",
             {{"type", "string"},
              {"description", "where it lives: the reporting node's region (\"\" = none), placed first"}}}}}}},
        {"usage",
         {{"type", "object"},
          {"description",
           "GPU time metered per second by capacity type and GPU model, its cost at the nodes' prices and at the "
           "on-demand reference price (integer micro-units); saving = on_demand - cost; idle_gpu_hours: of "
           "gpu_hours, the time every GPU of a member read below 1% utilisation while allocated"},
          {"properties",
           {{"lines", {{"type", "array"}, {"items", {{"type", "object"}}}}},
            {"gpu_hours", {{"type", "number"}}},
            {"idle_gpu_hours", {{"type", "number"}}},
            {"cost_micros", {{"type", "integer"}}},
            {"on_demand_micros", {{"type", "integer"}}},
            {"saving_micros", {{"type", "integer"}}}}}}}}}};
  schemas["SubmitJob"] = {
      {"type", "object"},
      {"required", {"spec_yaml"}},
      {"properties",
       {{"spec_yaml", {{"type", "string"}, {"description", "a job spec (docs/job-spec.md)"}}},
        {"model_config", {{"type", "object"}, {"description", "the config.json the spec's model names"}}},
        {"tenant", {{"type", "string"}}},
        {"dry_run",
         {{"type", "boolean"},
          {"description", "store nothing: answer 200 with which offers the job would take and what it would cost"}}}}}};
  schemas["Event"] = {{"type", "object"},
                      {"properties",
                       {{"seq", {{"type", "integer"}}},
                        {"job_id", {{"type", "string"}}},
                        {"time", {{"type", "string"}, {"format", "date-time"}}},
                        {"from", {{"type", "string"}}},
                        {"to", {{"type", "string"}}},
                        {"reason", {{"type", "string"}}}}}};
  schemas["Node"] = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}}},
        {"state",
         {{"type", "string"},
          {"enum", {"ready", "suspect", "cordoned", "blocked", "down"}},
          {"description",
           "blocked: lost (down) repeatedly of late, no new placements for a while (docs/architecture.md)"}}},
        {"capacity_type", {{"type", "string"}}},
        {"gpu_milli_allocated", {{"type", "integer"}}},
        {"inventory", {{"type", "object"}}},
        {"images",
         {{"type", "array"},
          {"description",
           "container images the node can run (job spec image:), canonical, sorted; empty when its "
           "agent runs no containers"},
          {"items", {{"type", "string"}, {"example", "localhost/busybox:latest"}}}}},
        {"unhealthy_gpus",
         {{"type", "object"},
          {"description",
           "GPUs nothing is placed on (lost, uncorrectable ECC, a pending retirement, or quarantined "
           "after a hardware XID), UUID -> why; their jobs were moved"},
          {"additionalProperties", {{"type", "string"}}}}},
        {"unfit_images",
         {{"type", "object"},
          {"description",
           "images the node holds but its driver cannot run (the image's org.gpugeek.cuda / rocm / "
           "driver labels), name -> why; never placed on"},
          {"additionalProperties", {{"type", "string"}}}}},
        {"engines",
         {{"type", "array"},
          {"description",
           "compiled-engine runtimes the node has (libtorch, onnxruntime, opencv-dnn, tensorrt); a job's "
           "`engine:` format is placed only where one of its runtimes is"},
          {"items", {{"type", "string"}}}}},
        {"jobs", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}};
  schemas["Pool"] = {{"type", "object"},
                     {"properties",
                      {{"rows", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                       {"gpu_milli_total", {{"type", "integer"}}},
                       {"gpu_milli_allocated", {{"type", "integer"}}},
                       {"frag_gpu_milli", {{"type", "number"}}},
                       {"frag_rate", {{"type", "number"}}},
                       {"policy", {{"type", "string"}}}}}};
  schemas["PlanRequest"] = {{"type", "object"},
                            {"required", {"model_config", "task"}},
                            {"properties",
                             {{"model_config", {{"type", "object"}}},
                              {"task", {{"type", "object"}}},
                              {"objective", {{"type", "string"}, {"enum", {"time", "cost", "gpus"}}}},
                              {"top", {{"type", "integer"}}}}}};
  const J list_of = [](const std::string& key, const std::string& schema) {
    return J{{"type", "object"}, {"properties", {{key, {{"type", "array"}, {"items", Ref(schema)}}}}}};
  }("jobs", "Job");

  J paths;
  paths["/v1/healthz"]["get"] = Op("Liveness", JsonResponse("ok", {{"type", "object"}}));
  paths["/v1/openapi.json"]["get"] = Op("This document", JsonResponse("OpenAPI 3.0", {{"type", "object"}}));
  paths["/v1/jobs"]["post"] = Op("Submit a job", JsonResponse("stored (durable)", Ref("Job")), "201");
  paths["/v1/jobs"]["post"]["responses"]["200"] =
      JsonResponse("with dry_run: the offers the job would take and its cost; nothing stored",
                   {{"type", "object"},
                    {"properties",
                     {{"dry_run", {{"type", "boolean"}}},
                      {"spec_yaml", {{"type", "string"}}},
                      {"plan", {{"type", "object"}, {"nullable", true}}},
                      {"lines", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                      {"available_micros", {{"type", "integer"}}},
                      {"enforced", {{"type", "boolean"}}}}}});
  // 402: a tenant with nothing left to spend when budgets are enforced (docs/billing.md).
  paths["/v1/jobs"]["post"]["responses"]["402"] = JsonResponse("the tenant has nothing left to spend", Ref("Error"));
  paths["/v1/jobs"]["post"]["requestBody"] = Body(Ref("SubmitJob"));
  paths["/v1/jobs"]["get"] =
      Op("List jobs, newest first (or oldest first), paged by id: pass the reply's next_after as after",
         JsonResponse("a page", list_of));
  paths["/v1/jobs"]["get"]["parameters"] = {QueryParam("state", "string", "PENDING ... CANCELLED"),
                                            QueryParam("tenant", "string", ""),
                                            QueryParam("name", "string", ""),
                                            QueryParam("order", "string", "newest (default) | oldest"),
                                            QueryParam("after", "string", "ids after this one in that order"),
                                            QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/jobs/{id}"]["get"] = Op("Get a job", JsonResponse("the job", Ref("Job")));
  paths["/v1/jobs/{id}"]["parameters"] = {PathParam("id")};
  paths["/v1/jobs/{id}/cancel"]["post"] = Op("Cancel a job", JsonResponse("the job", Ref("Job")));
  paths["/v1/jobs/{id}/cancel"]["parameters"] = {PathParam("id")};
  schemas["LogRange"] = {
      {"type", "object"},
      {"properties",
       {{"job", {{"type", "string"}}},
        {"rank", {{"type", "integer"}}},
        {"epoch", {{"type", "integer"}, {"description", "the placement read"}}},
        {"offset", {{"type", "integer"}}},
        {"next_offset", {{"type", "integer"}, {"description", "offset of the next read"}}},
        {"size", {{"type", "integer"}, {"description", "bytes in the log now"}}},
        {"data_b64", {{"type", "string"}, {"format", "byte"}, {"description", "the raw bytes, base64"}}},
        {"complete", {{"type", "boolean"}, {"description", "the job ended and no byte will be added"}}},
        {"state", {{"type", "string"}}},
        {"exit_code", {{"type", "integer"}, {"nullable", true}}},
        {"ranks", {{"type", "integer"}}},
        {"latest_epoch", {{"type", "integer"}, {"nullable", true}}},
        {"epochs",
         {{"type", "array"}, {"items", {{"type", "object"}}}, {"description", "[{epoch, size}], oldest first"}}}}}};
  paths["/v1/jobs/{id}/logs"]["get"] =
      Op("A byte range of one member's log; follow with offset=next_offset and wait_ms until complete",
         JsonResponse("the range", Ref("LogRange")));
  paths["/v1/jobs/{id}/logs"]["get"]["parameters"] = {
      PathParam("id"),
      QueryParam("rank", "integer", "gang rank, default 0"),
      QueryParam("epoch", "integer", "placement, default the rank's latest"),
      QueryParam("offset", "integer", "first byte, default 0"),
      QueryParam("limit", "integer", "bytes, 1..1048576, default 262144"),
      QueryParam("wait_ms", "integer", "0..10000: at the end of a log that may grow, wait this long for bytes")};
  schemas["ExecRequest"] = {
      {"type", "object"},
      {"required", {"argv"}},
      {"properties",
       {{"argv",
         {{"type", "array"},
          {"minItems", 1},
          {"maxItems", 4096},
          {"items", {{"type", "string"}}},
          {"description", "the command and its arguments, exec'd without a shell"}}},
        {"rank", {{"type", "integer"}, {"minimum", 0}, {"description", "node rank, default 0"}}},
        {"timeout_ms",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 86400000},
          {"description", "the command's process group is killed past this; default 3600000 (1 h)"}}}}}};
  {
    J exec =
        Op("Run a command beside a running member (same environment, working folder and user); its output "
           "streams as frames `stdout|stderr|exit LENGTH\\n` + bytes, the last an exit frame",
           {{"description", "the exec stream (docs/exec.md)"},
            {"content", {{"application/vnd.gpugeek.exec-stream", {{"schema", {{"type", "string"}}}}}}}});
    exec["requestBody"] = Body(Ref("ExecRequest"));
    exec["responses"]["503"] =
        JsonResponse("the member's node serves no node API (--metrics-listen off) or cannot be reached", Ref("Error"));
    paths["/v1/jobs/{id}/exec"]["post"] = exec;
    paths["/v1/jobs/{id}/exec"]["parameters"] = {PathParam("id")};
  }
  {
    const J port_row = {
        {"type", "object"},
        {"required", {"port", "address"}},
        {"properties",
         {{"port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}},
          {"address", {{"type", "string"}, {"description", "the bound address, e.g. 127.0.0.1 or ::"}}}}}};
    const J member_row = {
        {"type", "object"},
        {"required", {"rank", "node"}},
        {"properties",
         {{"rank", {{"type", "integer"}}},
          {"node", {{"type", "string"}}},
          {"ports", {{"type", "array"}, {"items", port_row}}},
          {"error", {{"type", "string"}, {"description", "why this member's ports could not be read"}}}}}};
    J ports = Op(
        "The TCP ports each member of a running job listens on (docs/ports.md)",
        JsonResponse("ports per member",
                     {{"type", "object"},
                      {"required", {"job_id", "members"}},
                      {"properties",
                       {{"job_id", {{"type", "string"}}}, {"members", {{"type", "array"}, {"items", member_row}}}}}}));
    paths["/v1/jobs/{id}/ports"]["get"] = ports;
    paths["/v1/jobs/{id}/ports"]["parameters"] = {PathParam("id")};
    J forward =
        Op("Open one TCP connection to a member's port: send `Connection: Upgrade` and `Upgrade: gpugeek-tcp`; after "
           "`101 Switching Protocols` the connection carries the TCP bytes both ways (docs/ports.md)",
           {{"description", "switched to gpugeek-tcp: the connection is the member's port"}}, "101");
    forward["responses"]["429"] = JsonResponse("too many forwarded connections open at once", Ref("Error"));
    forward["responses"]["426"] = JsonResponse("the request did not ask to switch to gpugeek-tcp", Ref("Error"));
    forward["responses"]["503"] = JsonResponse(
        "the member's node serves no node API or cannot be reached, or the port refused the connection", Ref("Error"));
    forward["parameters"] = {QueryParam("port", "integer", "the member's port, 1..65535 (required)"),
                             QueryParam("rank", "integer", "node rank, default 0")};
    paths["/v1/jobs/{id}/port-forward"]["post"] = forward;
    paths["/v1/jobs/{id}/port-forward"]["parameters"] = {PathParam("id")};
  }
  paths["/v1/events"]["get"] = Op(
      "Job state transitions, oldest first",
      JsonResponse("events",
                   {{"type", "object"}, {"properties", {{"events", {{"type", "array"}, {"items", Ref("Event")}}}}}}));
  paths["/v1/events"]["get"]["parameters"] = {QueryParam("job", "string", "only this job"),
                                              QueryParam("after", "integer", "events after this seq"),
                                              QueryParam("limit", "integer", "1..1000")};
  paths["/v1/nodes"]["get"] = Op("List nodes", JsonResponse("nodes", {{"type", "object"}}));
  paths["/v1/nodes/{name}"]["get"] = Op("Get a node", JsonResponse("the node", Ref("Node")));
  paths["/v1/nodes/{name}"]["delete"] =
      Op("Remove a decommissioned node from the pool (its metrics and Prometheus target go with it). 409 unless it "
         "is down or cordoned with no job on it; an agent that comes back later registers again",
         JsonResponse("the node as it was", Ref("Node")));
  paths["/v1/nodes/{name}"]["parameters"] = {PathParam("name")};
  for (const std::string action : {"cordon", "uncordon", "drain"}) {
    const std::string path = "/v1/nodes/{name}/" + action;
    paths[path]["post"] = Op(action == "drain"    ? "Cordon and move the node's jobs elsewhere"
                             : action == "cordon" ? "No new placements on the node"
                                                  : "Allow placements again",
                             JsonResponse("the node", Ref("Node")));
    paths[path]["parameters"] = {PathParam("name")};
  }
  paths["/v1/nodes/{name}/reclaim"]["post"] =
      Op("A reclaim notice (spot): the node goes away in deadline_s seconds. It is cordoned, its region avoided "
         "for a while, and its jobs asked to checkpoint (SIGTERM) and moved, their grace ending before the deadline",
         JsonResponse("the node", Ref("Node")));
  paths["/v1/nodes/{name}/reclaim"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"deadline_s"}},
            {"properties", {{"deadline_s", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3600}}}}}});
  paths["/v1/nodes/{name}/reclaim"]["parameters"] = {PathParam("name")};
  paths["/v1/pool"]["get"] =
      Op("GPUs by model and capacity type, allocation and fragmentation", JsonResponse("the pool", Ref("Pool")));
  paths["/v1/plans"]["post"] =
      Op("Plan a task over the pool without submitting", JsonResponse("plan", {{"type", "object"}}));
  paths["/v1/plans"]["post"]["requestBody"] = Body(Ref("PlanRequest"));
  paths["/v1/prometheus/targets"]["get"] = {
      {"summary",
       "Prometheus HTTP service discovery: one target group per node that is not down and announced a metrics "
       "address (https://prometheus.io/docs/prometheus/latest/http_sd/)"},
      {"responses",
       {{"200",
         JsonResponse(
             "target groups",
             {{"type", "array"},
              {"items",
               {{"type", "object"},
                {"properties",
                 {{"targets", {{"type", "array"}, {"items", {{"type", "string"}, {"example", "10.0.0.7:9471"}}}}},
                  {"labels",
                   {{"type", "object"},
                    {"properties",
                     {{"node", {{"type", "string"}}},
                      {"capacity_type", {{"type", "string"}}},
                      {"region", {{"type", "string"}}}}}}}}}}}})}}}};
  paths["/metrics"]["get"] = {
      {"summary", "The server's metrics (docs/metrics.md) in the Prometheus text format 0.0.4"},
      {"responses",
       {{"200",
         {{"description", "metrics"},
          {"content", {{"text/plain; version=0.0.4; charset=utf-8", {{"schema", {{"type", "string"}}}}}}}}}}}};
  paths["/v1/agents/register"]["post"] =
      Op("Agent registration (api/agent_protocol.h)", JsonResponse("ok", {{"type", "object"}}));
  paths["/v1/agents/{node}/heartbeat"]["post"] =
      Op("Agent heartbeat: reports in, desired assignments out", JsonResponse("assignments", {{"type", "object"}}));
  paths["/v1/agents/{node}/heartbeat"]["parameters"] = {PathParam("node")};
  paths["/v1/agents/{node}/reclaim"]["post"] =
      Op("The node's own reclaim notice (its provider takes it back in deadline_s seconds), with its node "
         "credential: as POST /v1/nodes/{name}/reclaim",
         JsonResponse("taken", {{"type", "object"}}));
  paths["/v1/agents/{node}/reclaim"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"deadline_s"}},
            {"properties", {{"deadline_s", {{"type", "integer"}, {"minimum", 1}, {"maximum", 3600}}}}}});
  paths["/v1/agents/{node}/reclaim"]["parameters"] = {PathParam("node")};
  const J archive_bytes = {{"application/octet-stream", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}};
  const J digest_param = {{"name", "digest"},
                          {"in", "path"},
                          {"required", true},
                          {"description", "the archive's SHA-256, 64 lower-case hex digits"},
                          {"schema", {{"type", "string"}, {"pattern", "^[0-9a-f]{64}$"}}}};
  paths["/v1/agents/{node}/archives/{digest}"]["get"] =
      Op("A workdir archive of a job with a member assigned to this node",
         {{"description", "the archive's bytes"}, {"content", archive_bytes}});
  paths["/v1/agents/{node}/archives/{digest}"]["parameters"] = {PathParam("node"), digest_param};
  paths["/v1/archives/{digest}"]["head"] = {
      {"summary", "Whether the caller's tenant has this archive (200) or not (404)"},
      {"responses",
       {{"200", {{"description", "the tenant has it"}}},
        {"400", {{"description", "invalid digest"}}},
        {"404", {{"description", "no such archive of the caller's tenant"}}}}}};
  paths["/v1/archives/{digest}"]["get"] =
      Op("The archive's bytes", {{"description", "the archive's bytes"}, {"content", archive_bytes}});
  J put = Op("Upload one piece of a workdir archive at `offset`; the piece completing `total` is verified",
             JsonResponse("the piece is stored; `complete` once the archive is verified and kept",
                          {{"type", "object"},
                           {"properties",
                            {{"digest", {{"type", "string"}}},
                             {"received", {{"type", "integer"}, {"description", "bytes the server holds"}}},
                             {"complete", {{"type", "boolean"}}},
                             {"entries", {{"type", "integer"}}}}}}));
  put["parameters"] = {{{"name", "offset"},
                        {"in", "query"},
                        {"required", true},
                        {"description", "byte offset of this piece"},
                        {"schema", {{"type", "integer"}, {"minimum", 0}}}},
                       {{"name", "total"},
                        {"in", "query"},
                        {"required", true},
                        {"description", "the archive's size in bytes"},
                        {"schema", {{"type", "integer"}, {"minimum", 1}}}}};
  put["requestBody"] = {{"required", true}, {"content", archive_bytes}};
  put["responses"]["413"] = JsonResponse("over the server's --max-archive-bytes or --max-archive-files", Ref("Error"));
  paths["/v1/archives/{digest}"]["put"] = put;
  paths["/v1/archives/{digest}"]["parameters"] = {digest_param};

  // Dataset versions (dataset_routes.h).
  const J object_param = {{"name", "digest"},
                          {"in", "path"},
                          {"required", true},
                          {"description", "the object's SHA-256, 64 lower-case hex digits"},
                          {"schema", {{"type", "string"}, {"pattern", "^[0-9a-f]{64}$"}}}};
  const J any_object = {{"type", "object"}};
  const auto version_paths = [&](const std::string& base, const std::string& objects, const std::string& noun,
                                 const std::string& plural, const std::string& limit_flag, bool object_get) {
    paths[base]["get"] = Op("The caller's tenant's " + plural + " with their branches and tags; page with after",
                            JsonResponse("a page", any_object));
    paths[base + "/{name}"]["get"] = Op("A " + noun + "'s branches and tags", JsonResponse("refs", any_object));
    paths[base + "/{name}/versions/{rev}"]["get"] =
        Op("The commit a revision names (branch, tag, digest or prefix, ~N)", JsonResponse("the commit", any_object));
    paths[base + "/{name}/log"]["get"] =
        Op("Commits from ?rev= (default main) back along first parents; continue with rev=next_rev",
           JsonResponse("commits", any_object));
    paths[base + "/{name}/diff"]["get"] =
        Op("Files added, removed and modified from ?from= to ?to=, by path; page with after",
           JsonResponse("changes", any_object));
    paths[base + "/{name}/branches/{branch}"]["put"] =
        Op("Compare-and-swap of a branch: {commit, expected} (\"\" = the branch must not exist); 409 when it moved",
           JsonResponse("moved", any_object));
    paths[base + "/{name}/branches/{branch}"]["put"]["requestBody"] = Body(any_object);
    paths[base + "/{name}/tags/{tag}"]["put"] =
        Op("Tag a commit: {commit}; 409 when the name is taken", JsonResponse("tagged", any_object));
    paths[base + "/{name}/tags/{tag}"]["put"]["requestBody"] = Body(any_object);
    paths[base + "/{name}/branches/{branch}"]["delete"] =
        Op("Delete a branch (its versions become garbage unless another ref reaches them)",
           JsonResponse("deleted", any_object));
    paths[base + "/{name}/tags/{tag}"]["delete"] = Op("Delete a tag", JsonResponse("deleted", any_object));
    paths[base + "/{name}"]["parameters"] = {PathParam("name")};
    paths[base + "/{name}/versions/{rev}"]["parameters"] = {PathParam("name"), PathParam("rev")};
    paths[base + "/{name}/log"]["parameters"] = {PathParam("name")};
    paths[base + "/{name}/diff"]["parameters"] = {PathParam("name")};
    paths[base + "/{name}/branches/{branch}"]["parameters"] = {PathParam("name"), PathParam("branch")};
    paths[base + "/{name}/tags/{tag}"]["parameters"] = {PathParam("name"), PathParam("tag")};
    paths[objects + "/missing"]["post"] =
        Op("Which of {digests: [...]} (at most 10,000) the caller's tenant's store lacks",
           JsonResponse("{missing: [...]}", any_object));
    paths[objects + "/missing"]["post"]["requestBody"] = Body(any_object);
    J put_object =
        Op("Store one object (?kind=chunk|tree|commit), children first: its bytes must hash to the digest "
           "and a tree's or commit's children must be stored already (409 otherwise)",
           JsonResponse("{digest, new}", any_object));
    put_object["requestBody"] = {{"required", true}, {"content", archive_bytes}};
    put_object["parameters"] = {QueryParam("kind", "string", "chunk, tree or commit")};
    put_object["responses"]["413"] = JsonResponse("over the server's " + limit_flag + " for the tenant", Ref("Error"));
    paths[objects + "/{digest}"]["put"] = put_object;
    paths[objects + "/{digest}"]["get"] =
        Op("An object's bytes", {{"description", "the object's bytes"}, {"content", archive_bytes}});
    paths[objects + "/{digest}"]["parameters"] = {object_param};
    if (!object_get) paths[objects + "/{digest}"].erase("get");
  };
  version_paths("/v1/datasets", "/v1/dataset-objects", "dataset", "datasets", "--max-dataset-bytes", true);
  version_paths("/v1/models", "/v1/model-objects", "model", "models", "--max-model-bytes", false);
  // The model registry (model_routes.h).
  paths["/v1/models/{name}/pulls"]["post"] =
      Op("Pull a version: {rev (default main), owner (another tenant that granted you pull)}; the pull is logged "
         "and the version's objects may then be read from /v1/model-objects with ?owner=&commit=",
         JsonResponse("{seq, owner, model, commit, tree, files, bytes, ...}", any_object));
  paths["/v1/models/{name}/pulls"]["post"]["requestBody"] = Body(any_object);
  paths["/v1/models/{name}/pulls"]["get"] = Op(
      "The pull log of one of your models, oldest first; page with after (a seq)", JsonResponse("pulls", any_object));
  paths["/v1/models/{name}/pulls"]["parameters"] = {PathParam("name")};
  paths["/v1/models/{name}/grants"]["get"] =
      Op("Which other tenants may pull, deploy or fine-tune one of your models", JsonResponse("grants", any_object));
  paths["/v1/models/{name}/grants"]["parameters"] = {PathParam("name")};
  paths["/v1/models/{name}/grants/{tenant}"]["put"] =
      Op("Grant a tenant rights on your model: {rights: [pull, deploy, finetune]} ([] revokes)",
         JsonResponse("the grant", any_object));
  paths["/v1/models/{name}/grants/{tenant}"]["put"]["requestBody"] = Body(any_object);
  paths["/v1/models/{name}/grants/{tenant}"]["delete"] =
      Op("Revoke a tenant's rights", JsonResponse("revoked", any_object));
  paths["/v1/models/{name}/grants/{tenant}"]["parameters"] = {PathParam("name"), PathParam("tenant")};
  paths["/v1/shared-models"]["get"] =
      Op("Models other tenants granted yours rights on; page with after", JsonResponse("a page", any_object));
  J get_model_object =
      Op("An object's bytes: your tenant's, or (?owner=&commit=) one of a version of another tenant's model you pulled",
         {{"description", "the object's bytes"}, {"content", archive_bytes}});
  get_model_object["parameters"] = {QueryParam("owner", "string", "the model's tenant (default yours)"),
                                    QueryParam("commit", "string", "the pulled version, for another tenant's model")};
  paths["/v1/model-objects/{digest}"]["get"] = get_model_object;
  paths["/v1/agents/{node}/datasets/{commit}/objects/{digest}"]["get"] =
      Op("An object of the dataset version of a job with a member assigned to this node",
         {{"description", "the object's bytes"}, {"content", archive_bytes}});
  paths["/v1/agents/{node}/datasets/{commit}/objects/{digest}"]["parameters"] = {PathParam("node"), PathParam("commit"),
                                                                                 object_param};
  paths["/v1/agents/{node}/models/{commit}/objects/{digest}"]["get"] =
      Op("An object of the model version (`weights:`) of a job with a member assigned to this node",
         {{"description", "the object's bytes"}, {"content", archive_bytes}});
  paths["/v1/agents/{node}/models/{commit}/objects/{digest}"]["parameters"] = {PathParam("node"), PathParam("commit"),
                                                                               object_param};

  schemas["Tenant"] = {
      {"type", "object"},
      {"properties", {{"name", {{"type", "string"}}}, {"created_at", {{"type", "string"}, {"format", "date-time"}}}}}};
  schemas["User"] = {{"type", "object"},
                     {"properties",
                      {{"name", {{"type", "string"}}},
                       {"tenant", {{"type", "string"}}},
                       {"role", {{"type", "string"}, {"enum", {"admin", "member", "viewer"}}}},
                       {"created_at", {{"type", "string"}, {"format", "date-time"}}}}}};
  schemas["Token"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}, {"description", "the public part: 16 hex digits"}}},
        {"user", {{"type", "string"}}},
        {"description", {{"type", "string"}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"expires_at", {{"type", "string"}, {"format", "date-time"}, {"nullable", true}}},
        {"revoked_at", {{"type", "string"}, {"format", "date-time"}, {"nullable", true}}},
        {"token", {{"type", "string"}, {"description", "the token itself: in the creation reply only"}}}}}};
  const auto page_of = [](const std::string& key, const std::string& schema) {
    return J{{"type", "object"},
             {"properties",
              {{key, {{"type", "array"}, {"items", Ref(schema)}}},
               {"next_after", {{"type", "string"}, {"nullable", true}}}}}};
  };
  const J paging = {QueryParam("after", "string", "the last name/id of the previous page"),
                    QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/whoami"]["get"] =
      Op("The user, tenant and role the token acts as", JsonResponse("who", {{"type", "object"}}));
  paths["/v1/tenants"]["get"] = Op("List tenants", JsonResponse("a page", page_of("tenants", "Tenant")));
  paths["/v1/tenants"]["get"]["parameters"] = paging;
  paths["/v1/tenants"]["post"] = Op("Create a tenant", JsonResponse("created", Ref("Tenant")), "201");
  paths["/v1/tenants"]["post"]["requestBody"] =
      Body({{"type", "object"}, {"required", {"name"}}, {"properties", {{"name", {{"type", "string"}}}}}});
  paths["/v1/users"]["get"] = Op("List users", JsonResponse("a page", page_of("users", "User")));
  paths["/v1/users"]["get"]["parameters"] = paging;
  paths["/v1/users"]["post"] = Op("Create a user", JsonResponse("created", Ref("User")), "201");
  paths["/v1/users"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"name", "tenant"}},
            {"properties",
             {{"name", {{"type", "string"}}},
              {"tenant", {{"type", "string"}}},
              {"role", {{"type", "string"}, {"enum", {"admin", "member", "viewer"}}}}}}});
  paths["/v1/tokens"]["get"] =
      Op("List the caller's API tokens (an admin: everyone's)", JsonResponse("a page", page_of("tokens", "Token")));
  paths["/v1/tokens"]["get"]["parameters"] = paging;
  paths["/v1/tokens"]["post"] = Op("Create an API token; the reply's `token` is the only time it is shown",
                                   JsonResponse("created", Ref("Token")), "201");
  paths["/v1/tokens"]["post"]["requestBody"] = Body({{"type", "object"},
                                                     {"properties",
                                                      {{"user", {{"type", "string"}}},
                                                       {"description", {{"type", "string"}}},
                                                       {"expires_in_s", {{"type", "integer"}, {"minimum", 1}}}}}});
  paths["/v1/tokens/{id}"]["delete"] = Op("Revoke an API token", JsonResponse("the revoked token", Ref("Token")));
  paths["/v1/tokens/{id}"]["parameters"] = {PathParam("id")};
  schemas["Secret"] = {{"type", "object"},
                       {"description", "A secret of the caller's tenant: never its value (jobs get it in their env)"},
                       {"properties",
                        {{"name", {{"type", "string"}}},
                         {"tenant", {{"type", "string"}}},
                         {"created_at", {{"type", "string"}, {"format", "date-time"}}},
                         {"updated_at", {{"type", "string"}, {"format", "date-time"}}}}}};
  paths["/v1/secrets"]["get"] = Op("List the caller's tenant's secrets (names and times, never values)",
                                   JsonResponse("a page", page_of("secrets", "Secret")));
  paths["/v1/secrets"]["get"]["parameters"] = paging;
  paths["/v1/secrets/{name}"]["put"] =
      Op("Create or replace a secret of the caller's tenant; specs refer to it as env: {VAR: {secret: NAME}}",
         JsonResponse("stored sealed (durable)", Ref("Secret")));
  paths["/v1/secrets/{name}"]["put"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"value"}},
            {"properties", {{"value", {{"type", "string"}, {"maxLength", 65536}, {"writeOnly", true}}}}}});
  paths["/v1/secrets/{name}"]["get"] =
      Op("A secret's name and times (never its value)", JsonResponse("the secret", Ref("Secret")));
  paths["/v1/secrets/{name}"]["delete"] = Op("Delete a secret", JsonResponse("the deleted secret", Ref("Secret")));
  paths["/v1/secrets/{name}"]["parameters"] = {PathParam("name")};
  paths["/v1/keys/rotate"]["post"] =
      Op("Rotate the master key: a new key in the key file, every data key re-wrapped; no sealed data is rewritten",
         JsonResponse("done", {{"type", "object"},
                               {"properties",
                                {{"new_key_id", {{"type", "string"}}},
                                 {"rewrapped", {{"type", "integer"}}},
                                 {"retired", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}}));
  paths["/v1/keys/rotate"]["post"]["requestBody"] = {
      {"required", false},
      {"content",
       {{"application/json",
         {{"schema",
           {{"type", "object"},
            {"properties",
             {{"retire",
               {{"type", "boolean"},
                {"description", "also remove master keys no data key uses (default false)"}}}}}}}}}}}};

  schemas["JoinToken"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"description", {{"type", "string"}}},
        {"created_by", {{"type", "string"}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"expires_at", {{"type", "string"}, {"format", "date-time"}, {"nullable", true}}},
        {"uses_left", {{"type", "integer"}}},
        {"provider", {{"type", "string"}, {"description", "whose nodes join with it; \"\" = the platform's"}}},
        {"token", {{"type", "string"}, {"description", "ggj_...: in the creation reply only"}}}}}};
  paths["/v1/join-tokens"]["get"] = Op("List join tokens", JsonResponse("a page", page_of("join_tokens", "JoinToken")));
  paths["/v1/join-tokens"]["get"]["parameters"] = paging;
  paths["/v1/join-tokens"]["post"] =
      Op("Create a join token: `uses` agents may join the pool with it (each gets its own node credential)",
         JsonResponse("created", Ref("JoinToken")), "201");
  paths["/v1/join-tokens"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"properties",
             {{"description", {{"type", "string"}}},
              {"expires_in_s", {{"type", "integer"}, {"minimum", 1}}},
              {"uses", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100000}}},
              {"provider",
               {{"type", "string"},
                {"description", "a tenant: the nodes that join with it are its, and it is owed their usage"}}}}}});
  paths["/v1/join-tokens/{id}"]["delete"] = Op("Delete a join token", JsonResponse("deleted", {{"type", "object"}}));
  paths["/v1/join-tokens/{id}"]["parameters"] = {PathParam("id")};

  // Tenants' quotas and fair share (quota_routes.h).
  schemas["TenantQuota"] = {
      {"type", "object"},
      {"properties",
       {{"tenant", {{"type", "string"}}},
        {"weight", {{"type", "number"}, {"description", "fair-share weight (Slurm's shares)"}}},
        {"max_gpus_by_model",
         {{"type", "object"},
          {"additionalProperties", {{"type", "integer"}}},
          {"description", "whole GPUs per model"}}},
        {"max_gpu_milli", {{"type", "integer"}, {"description", "milli-GPU over all models; 0 = unlimited"}}},
        {"max_jobs", {{"type", "integer"}, {"description", "jobs holding GPUs at once; 0 = unlimited"}}},
        {"held_gpu_milli", {{"type", "integer"}}},
        {"held_gpu_milli_by_model", {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}}},
        {"jobs", {{"type", "integer"}, {"description", "jobs holding GPUs"}}},
        {"usage_gpu_milli_seconds", {{"type", "number"}, {"description", "decayed usage (half_life_s)"}}},
        {"normalized_usage", {{"type", "number"}}},
        {"normalized_share", {{"type", "number"}}},
        {"fair_share_factor", {{"type", "number"}, {"description", "2^(-normalized_usage/normalized_share)"}}},
        {"over_quota_jobs",
         {{"type", "array"},
          {"items",
           {{"type", "object"}, {"properties", {{"id", {{"type", "string"}}}, {"reason", {{"type", "string"}}}}}}}}}}}};
  paths["/v1/quota"]["get"] =
      Op("Use against limit and fair share: the caller's tenant (an admin: every tenant, paged by name)",
         JsonResponse("a page", {{"type", "object"},
                                 {"properties",
                                  {{"tenants", {{"type", "array"}, {"items", Ref("TenantQuota")}}},
                                   {"next_after", {{"type", "string"}, {"nullable", true}}},
                                   {"half_life_s", {{"type", "number"}}}}}}));
  paths["/v1/quota"]["get"]["parameters"] = {QueryParam("tenant", "string", "only this tenant"),
                                             QueryParam("after", "string", "the last tenant of the previous page"),
                                             QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/tenants/{name}/quota"]["put"] = Op("Set a tenant's fair-share weight and quota (absent or 0 = unlimited)",
                                                JsonResponse("the tenant's quota", Ref("TenantQuota")));
  paths["/v1/tenants/{name}/quota"]["put"]["requestBody"] =
      Body({{"type", "object"},
            {"properties",
             {{"weight", {{"type", "number"}, {"description", "> 0, default 1"}}},
              {"max_gpu_milli", {{"type", "integer"}, {"minimum", 0}}},
              {"max_jobs", {{"type", "integer"}, {"minimum", 0}}},
              {"max_gpus_by_model", {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}}}}}});
  paths["/v1/tenants/{name}/quota"]["parameters"] = {PathParam("name")};

  // The marketplace's money (billing_routes.h, docs/billing.md). Amounts: integer micro-units.
  const J money = {{"type", "integer"}, {"format", "int64"}, {"description", "micro-units of the pool's currency"}};
  const J amount = {{"type", "string"}, {"description", "decimal with up to six decimals, e.g. \"10.00\""}};
  schemas["LedgerTransaction"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"kind", {{"type", "string"}, {"enum", {"grant", "top-up", "charge", "refund", "payout", "expire"}}}},
        {"at", {{"type", "string"}, {"format", "date-time"}}},
        {"tenant", {{"type", "string"}}},
        {"job", {{"type", "string"}}},
        {"memo", {{"type", "string"}}},
        {"postings",
         {{"type", "array"},
          {"items", {{"type", "object"}, {"properties", {{"account", {{"type", "string"}}}, {"micros", money}}}}}}},
        {"expires_at", {{"type", "string"}, {"format", "date-time"}}},
        {"gpu_milli_seconds", {{"type", "integer"}}},
        {"gpu_model", {{"type", "string"}}},
        {"capacity_type", {{"type", "string"}}}}}};
  paths["/v1/offers"]["get"] =
      Op("What can be rented now, cheapest first: ready nodes per GPU model, capacity type, region, provider and price",
         JsonResponse("the offers", {{"type", "object"},
                                     {"properties",
                                      {{"offers",
                                        {{"type", "array"},
                                         {"items",
                                          {{"type", "object"},
                                           {"properties",
                                            {{"gpu_model", {{"type", "string"}}},
                                             {"capacity_type", {{"type", "string"}}},
                                             {"region", {{"type", "string"}}},
                                             {"provider", {{"type", "string"}}},
                                             {"price_micros_per_gpu_hour", money},
                                             {"min_rental_s", {{"type", "integer"}, {"minimum", 0}}},
                                             {"nodes", {{"type", "integer"}}},
                                             {"gpus", {{"type", "integer"}}},
                                             {"gpus_free", {{"type", "integer"}}},
                                             {"max_gpus_free_on_node", {{"type", "integer"}}}}}}}}}}}}));
  paths["/v1/offers"]["get"]["parameters"] = {
      QueryParam("gpu", "string", "a part of the GPU model id, any case"),
      QueryParam("capacity", "string", "on-demand, spot or reserved"), QueryParam("region", "string", "this region"),
      QueryParam("min_gpus", "integer", "at least this many GPUs free on one node")};
  paths["/v1/balance"]["get"] =
      Op("What a tenant may spend now: unexpired credit and cash",
         JsonResponse("the balance", {{"type", "object"},
                                      {"properties",
                                       {{"tenant", {{"type", "string"}}},
                                        {"available_micros", money},
                                        {"credit_micros", money},
                                        {"cash_micros", money},
                                        {"available", {{"type", "string"}}},
                                        {"enforced", {{"type", "boolean"}}},
                                        {"credits", {{"type", "array"}, {"items", {{"type", "object"}}}}}}}}));
  paths["/v1/balance"]["get"]["parameters"] = {QueryParam("tenant", "string", "default: the caller's")};
  paths["/v1/ledger"]["get"] =
      Op("A tenant's ledger transactions in posting order (an admin without ?tenant=: all), paged",
         JsonResponse("a page", {{"type", "object"},
                                 {"properties",
                                  {{"entries", {{"type", "array"}, {"items", Ref("LedgerTransaction")}}},
                                   {"next_after", {{"type", "string"}, {"nullable", true}}}}}}));
  paths["/v1/ledger"]["get"]["parameters"] = {QueryParam("tenant", "string", "default: the caller's"),
                                              QueryParam("after", "string", "next_after of the previous page"),
                                              QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/bill"]["get"] =
      Op("A tenant's bill for a calendar month (UTC)", JsonResponse("the bill", {{"type", "object"}}));
  paths["/v1/bill"]["get"]["parameters"] = {QueryParam("period", "string", "YYYY-MM, default this month"),
                                            QueryParam("tenant", "string", "default: the caller's")};
  paths["/v1/earnings"]["get"] =
      Op("A provider's month: its nodes' sales per GPU model and capacity type, the platform's fees, what it earned, "
         "its payouts and what it is owed now",
         JsonResponse("the earnings", {{"type", "object"},
                                       {"properties",
                                        {{"provider", {{"type", "string"}}},
                                         {"lines", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                                         {"sales_micros", money},
                                         {"fees_micros", money},
                                         {"earned_micros", money},
                                         {"paid_out_micros", money},
                                         {"owed_now_micros", money}}}}));
  paths["/v1/earnings"]["get"]["parameters"] = {QueryParam("period", "string", "YYYY-MM, default this month"),
                                                QueryParam("provider", "string", "default: the caller's tenant")};
  paths["/v1/cost-report"]["get"] =
      Op("Per job of a calendar month (UTC): GPU-hours, idle GPU time and its cost, cost, refunds for time lost to "
         "the platform, on-demand equivalent and saving; totals; daily spend (net of refunds)",
         JsonResponse("a page of jobs", {{"type", "object"},
                                         {"properties",
                                          {{"jobs", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                                           {"totals", {{"type", "object"}}},
                                           {"daily_cost_micros", {{"type", "array"}, {"items", money}}},
                                           {"next_after", {{"type", "string"}, {"nullable", true}}}}}}));
  paths["/v1/cost-report"]["get"]["parameters"] = {
      QueryParam("period", "string", "YYYY-MM, default this month"),
      QueryParam("tenant", "string", "default: the caller's (an admin: all)"),
      QueryParam("after", "string", "the last job of the previous page"), QueryParam("limit", "integer", "1..1000")};
  paths["/v1/tenants/{name}/top-ups"]["post"] =
      Op("Adds money to a tenant's cash", JsonResponse("the transaction", Ref("LedgerTransaction")), "201");
  paths["/v1/tenants/{name}/top-ups"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"amount"}},
            {"properties",
             {{"amount", amount},
              {"id", {{"type", "string"}, {"description", "idempotency key: the same id posts once"}}},
              {"memo", {{"type", "string"}}}}}});
  paths["/v1/tenants/{name}/top-ups"]["parameters"] = {PathParam("name")};
  paths["/v1/tenants/{name}/grants"]["post"] = Op("Grants a tenant credit (once per grant name)",
                                                  JsonResponse("the transaction", Ref("LedgerTransaction")), "201");
  paths["/v1/tenants/{name}/grants"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"grant", "amount"}},
            {"properties",
             {{"grant", {{"type", "string"}}},
              {"amount", amount},
              {"expires_in_days", {{"type", "integer"}, {"minimum", 0}, {"description", "0 = never"}}},
              {"memo", {{"type", "string"}}}}}});
  paths["/v1/tenants/{name}/grants"]["parameters"] = {PathParam("name")};
  paths["/v1/providers/{name}/payouts"]["post"] =
      Op("Pays a provider out of what it is owed", JsonResponse("the transaction", Ref("LedgerTransaction")), "201");
  paths["/v1/providers/{name}/payouts"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"amount", "id"}},
            {"properties", {{"amount", amount}, {"id", {{"type", "string"}}}}}});
  paths["/v1/providers/{name}/payouts"]["parameters"] = {PathParam("name")};
  // Monthly budgets of tenants and users (budget_routes.h, docs/billing.md).
  schemas["Budget"] = {
      {"type", "object"},
      {"properties",
       {{"tenant", {{"type", "string"}}},
        {"user", {{"type", "string"}, {"description", "\"\" = the whole tenant"}}},
        {"monthly_limit_micros", money},
        {"monthly_limit", {{"type", "string"}}},
        {"spent_micros", money},
        {"used_percent", {{"type", "number"}}},
        {"alert_percents", {{"type", "array"}, {"items", {{"type", "integer"}}}}},
        {"alerted_percent",
         {{"type", "integer"}, {"description", "the highest alert percent reached this month (0 = none)"}}},
        {"updated_at", {{"type", "string"}, {"format", "date-time"}}}}}};
  paths["/v1/budgets"]["get"] =
      Op("This month's budgets of the caller's tenant (an admin: every tenant's) with what each has spent",
         JsonResponse("a page of budgets", {{"type", "object"},
                                            {"properties",
                                             {{"period", {{"type", "string"}}},
                                              {"budgets", {{"type", "array"}, {"items", Ref("Budget")}}},
                                              {"next_after", {{"type", "string"}, {"nullable", true}}}}}}));
  paths["/v1/budgets"]["get"]["parameters"] = {
      QueryParam("tenant", "string", "default: the caller's (an admin: all)"),
      QueryParam("after", "string", "tenant/user of the last budget of the previous page"),
      QueryParam("limit", "integer", "1..1000")};
  const J budget_body = Body({{"type", "object"},
                              {"required", {"monthly_limit"}},
                              {"properties",
                               {{"monthly_limit", amount},
                                {"alert_percents",
                                 {{"type", "array"},
                                  {"maxItems", 10},
                                  {"items", {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000}}},
                                  {"description", "percents of the limit to alert at; default [50, 80, 100]"}}}}}});
  for (const char* who : {"tenants", "users"}) {
    const std::string path = fmt::format("/v1/{}/{{name}}/budget", who);
    paths[path]["put"] = Op(fmt::format("Sets the monthly budget of a {} (refused and stopped at it; 402)",
                                        std::string(who) == "tenants" ? "tenant" : "user, within its tenant's"),
                            JsonResponse("the budget", Ref("Budget")));
    paths[path]["put"]["requestBody"] = budget_body;
    paths[path]["delete"] = Op("Removes the budget", JsonResponse("deleted", {{"type", "object"}}));
    paths[path]["parameters"] = {PathParam("name")};
  }

  // Reserved capacity (reservation_routes.h, docs/billing.md).
  const J gpu_hours = {{"type", "number"}, {"description", "GPU-hours"}};
  schemas["Reservation"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"tenant", {{"type", "string"}}},
        {"gpu_model", {{"type", "string"}}},
        {"gpus", {{"type", "integer"}}},
        {"price_micros", money},
        {"price", {{"type", "string"}, {"description", "per GPU-hour"}}},
        {"start", {{"type", "string"}, {"format", "date-time"}}},
        {"end", {{"type", "string"}, {"format", "date-time"}}},
        {"state", {{"type", "string"}, {"enum", {"scheduled", "active", "ended"}}}},
        {"created_by", {{"type", "string"}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"nodes", {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "the nodes held now"}}},
        {"charged_hours", {{"type", "integer"}}},
        {"reserved_gpu_hours", gpu_hours},
        {"held_gpu_hours", gpu_hours},
        {"used_gpu_hours", gpu_hours},
        {"unused_gpu_hours", gpu_hours},
        {"used_percent", {{"type", "number"}, {"description", "of the GPU time held"}}},
        {"charged_micros", money},
        {"charged", {{"type", "string"}}}}}};
  paths["/v1/reservations"]["get"] =
      Op("Reservations of the caller's tenant (an admin: every tenant's) with GPU time reserved, held, used, unused",
         JsonResponse("a page of reservations", {{"type", "object"},
                                                 {"properties",
                                                  {{"reservations", {{"type", "array"}, {"items", Ref("Reservation")}}},
                                                   {"next_after", {{"type", "string"}, {"nullable", true}}}}}}));
  paths["/v1/reservations"]["get"]["parameters"] = {
      QueryParam("tenant", "string", "default: the caller's (an admin: all)"),
      QueryParam("after", "string", "id of the last reservation of the previous page"),
      QueryParam("limit", "integer", "1..1000")};
  paths["/v1/reservations"]["post"] =
      Op("Reserves GPUs of a model for a tenant for a term, held on whole nodes and charged per hour; 409 when the "
         "pool has too few",
         JsonResponse("the reservation", Ref("Reservation")), "201");
  paths["/v1/reservations"]["post"]["requestBody"] =
      Body({{"type", "object"},
            {"required", {"tenant", "gpu_model", "gpus", "price", "hours"}},
            {"properties",
             {{"tenant", {{"type", "string"}}},
              {"gpu_model", {{"type", "string"}}},
              {"gpus", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100000}}},
              {"price", amount},
              {"hours", {{"type", "integer"}, {"minimum", 1}, {"maximum", 26304}}},
              {"start", {{"type", "string"}, {"format", "date-time"}, {"description", "default: now"}}}}}});
  paths["/v1/reservations/{id}"]["get"] = Op("One reservation", JsonResponse("the reservation", Ref("Reservation")));
  paths["/v1/reservations/{id}"]["parameters"] = {PathParam("id")};
  paths["/v1/reservations/{id}/cancel"]["post"] =
      Op("Ends the term now (charged up to now)", JsonResponse("the reservation", Ref("Reservation")));
  paths["/v1/reservations/{id}/cancel"]["parameters"] = {PathParam("id")};

  // Hyper-parameter experiments (experiment_routes.h, docs/hpo.md).
  schemas["Experiment"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"name", {{"type", "string"}}},
        {"tenant", {{"type", "string"}}},
        {"user", {{"type", "string"}}},
        {"state", {{"type", "string"}, {"enum", {"running", "stopping", "succeeded", "stopped", "failed"}}}},
        {"reason", {{"type", "string"}}},
        {"metric", {{"type", "string"}}},
        {"direction", {{"type", "string"}, {"enum", {"minimize", "maximize"}}}},
        {"budget",
         {{"type", "object"},
          {"properties",
           {{"trials", {{"type", "integer"}}},
            {"gpu_seconds", {{"type", "integer"}, {"description", "GPU-seconds of all trials; 0 = none"}}}}}}},
        {"parallelism", {{"type", "integer"}}},
        {"sampler", {{"type", "string"}}},
        {"pruner", {{"type", "string"}}},
        {"counts", {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}}},
        {"gpu_seconds", {{"type", "number"}, {"description", "metered GPU time of all trials"}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"updated_at", {{"type", "string"}, {"format", "date-time"}}},
        {"spec_yaml", {{"type", "string"}}}}}};
  schemas["Trial"] = {{"type", "object"},
                      {"properties",
                       {{"number", {{"type", "integer"}}},
                        {"state", {{"type", "string"}, {"enum", {"running", "complete", "pruned", "failed"}}}},
                        {"params", {{"type", "object"}}},
                        {"value", {{"type", "number"}, {"nullable", true}}},
                        {"job_id", {{"type", "string"}}},
                        {"reason", {{"type", "string"}}},
                        {"last_step", {{"type", "integer"}, {"nullable", true}}},
                        {"last_value", {{"type", "number"}, {"nullable", true}}},
                        {"gpu_seconds", {{"type", "number"}}},
                        {"intermediate",
                         {{"type", "array"},
                          {"description", "[step, value] pairs (GET .../trials/{number} only)"},
                          {"items", {{"type", "array"}, {"items", {{"type", "number"}}}}}}}}}};
  paths["/v1/experiments"]["post"] =
      Op("Start a hyper-parameter experiment; its trials run as jobs of the caller's tenant",
         JsonResponse("stored (durable)", Ref("Experiment")), "201");
  paths["/v1/experiments"]["post"]["requestBody"] =
      Body({{"type", "object"}, {"required", {"spec_yaml"}}, {"properties", {{"spec_yaml", {{"type", "string"}}}}}});
  paths["/v1/experiments"]["get"] = Op("List experiments (the caller's tenant's; an admin's: every tenant's)",
                                       JsonResponse("a page", page_of("experiments", "Experiment")));
  paths["/v1/experiments"]["get"]["parameters"] = {
      QueryParam("state", "string", "running, stopping, succeeded, stopped or failed"),
      QueryParam("tenant", "string", "admins: only this tenant"),
      QueryParam("after", "string", "the last id of the previous page"),
      QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/experiments/{id}"]["get"] =
      Op("An experiment with a page of its trials, the best-so-far curve, parameter importance and the best trial",
         JsonResponse("the experiment",
                      {{"allOf",
                        {Ref("Experiment"),
                         {{"type", "object"},
                          {"properties",
                           {{"trials", {{"type", "array"}, {"items", Ref("Trial")}}},
                            {"next_after", {{"type", "integer"}, {"nullable", true}}},
                            {"best_so_far", {{"type", "array"}, {"items", {{"type", "number"}, {"nullable", true}}}}},
                            {"importance", {{"type", "array"}, {"items", {{"type", "object"}}}}},
                            {"best", {{"type", "object"}, {"nullable", true}}}}}}}}}));
  paths["/v1/experiments/{id}"]["get"]["parameters"] = {
      QueryParam("after", "integer", "the last trial number of the previous page"),
      QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/experiments/{id}"]["parameters"] = {PathParam("id")};
  paths["/v1/experiments/{id}/trials/{number}"]["get"] =
      Op("One trial with every value it reported", JsonResponse("the trial", Ref("Trial")));
  paths["/v1/experiments/{id}/trials/{number}"]["parameters"] = {PathParam("id"), PathParam("number")};
  paths["/v1/experiments/{id}/export"]["get"] =
      Op("Every trial as CSV: number,state,value,<parameters>,last_step,last_intermediate",
         {{"description", "CSV (RFC 4180)"}, {"content", {{"text/csv", {{"schema", {{"type", "string"}}}}}}}});
  paths["/v1/experiments/{id}/export"]["parameters"] = {PathParam("id")};
  paths["/v1/experiments/{id}/stop"]["post"] =
      Op("Stop an experiment: no new trials; running ones are cancelled", JsonResponse("stopping", Ref("Experiment")));
  paths["/v1/experiments/{id}/stop"]["parameters"] = {PathParam("id")};

  // Model services (service_routes.h, docs/service-spec.md).
  const nlohmann::json int_map = {{"type", "object"}, {"additionalProperties", {{"type", "integer"}}}};
  schemas["Service"] = {
      {"type", "object"},
      {"properties",
       {{"id", {{"type", "string"}}},
        {"name", {{"type", "string"}}},
        {"tenant", {{"type", "string"}}},
        {"user", {{"type", "string"}}},
        {"state", {{"type", "string"}, {"enum", {"ACTIVE", "DELETED"}}}},
        {"reason", {{"type", "string"}}},
        {"generation", {{"type", "integer"}, {"description", "bumped when the spec or the traffic weights change"}}},
        {"versions",
         {{"type", "array"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"name", {{"type", "string"}}},
              {"weight", {{"type", "integer"}}},
              {"desired", {{"type", "integer"}}},
              {"requests",
               {{"type", "integer"},
                {"description", "answered since the reporting gateways started (observed split)"}}},
              {"metered_requests", {{"type", "integer"}, {"description", "metered since the service began"}}},
              {"metered_tokens", {{"type", "integer"}, {"description", "metered since the service began"}}}}}}}}},
        {"replicas",
         {{"type", "object"},
          {"properties",
           {{"min", {{"type", "integer"}}}, {"max", {{"type", "integer"}}}, {"initial", {{"type", "integer"}}}}}}},
        {"desired", {{"type", "integer"}, {"description", "desired replicas, all versions"}}},
        {"ready", {{"type", "integer"}}},
        {"created_at", {{"type", "string"}, {"format", "date-time"}}},
        {"updated_at", {{"type", "string"}, {"format", "date-time"}}},
        {"spec_yaml", {{"type", "string"}}}}}};
  schemas["Replica"] = {
      {"type", "object"},
      {"properties",
       {{"version", {{"type", "string"}}},
        {"ordinal", {{"type", "integer"}}},
        {"job", {{"type", "string"}}},
        {"node", {{"type", "string"}}},
        {"address", {{"type", "string"}}},
        {"port", {{"type", "integer"}}},
        {"state", {{"type", "string"}, {"enum", {"PENDING", "STARTING", "READY", "NOT_READY", "ENDED"}}}},
        {"since", {{"type", "string"}, {"format", "date-time"}}}}}};
  paths["/v1/services"]["post"] =
      Op("Deploy a service, or replace the spec of the caller's service of that name (a rolling update)",
         JsonResponse("stored (durable)", Ref("Service")), "201");
  paths["/v1/services"]["post"]["requestBody"] =
      Body({{"type", "object"}, {"required", {"spec_yaml"}}, {"properties", {{"spec_yaml", {{"type", "string"}}}}}});
  paths["/v1/services"]["get"] = Op("List services (the caller's tenant's; an admin's: every tenant's)",
                                    JsonResponse("a page", page_of("services", "Service")));
  paths["/v1/services"]["get"]["parameters"] = {QueryParam("state", "string", "ACTIVE (default) or DELETED"),
                                                QueryParam("tenant", "string", "admins: only this tenant"),
                                                QueryParam("after", "string", "the last id of the previous page"),
                                                QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/services/load"]["post"] =
      Op("A gateway's load per service (each second); the autoscaler sums the gateways of the last 5 s",
         JsonResponse("stored in memory", {{"type", "object"}}));
  paths["/v1/services/load"]["post"]["requestBody"] = Body(
      {{"type", "object"},
       {"required", {"gateway"}},
       {"properties",
        {{"gateway", {{"type", "string"}}},
         {"instance",
          {{"type", "string"},
           {"description", "GATEWAY_ID/NONCE: the counters count from this instance's start (serverless metering)"}}},
         {"services",
          {{"type", "object"},
           {"additionalProperties",
            {{"type", "object"},
             {"properties",
              {{"in_flight", {{"type", "integer"}}},
               {"queued", {{"type", "integer"}}},
               {"versions",
                {{"type", "object"},
                 {"additionalProperties", {{"type", "integer"}}},
                 {"description", "requests answered per version since the instance started"}}},
               {"tokens",
                {{"type", "object"},
                 {"additionalProperties", {{"type", "integer"}}},
                 {"description", "tokens the replicas reported per version since then"}}}}}}}}}}}});
  paths["/v1/services/{name}"]["get"] = Op("A service", JsonResponse("the service", Ref("Service")));
  paths["/v1/services/{name}"]["delete"] =
      Op("Delete a service: its replicas are cancelled", JsonResponse("deleted", Ref("Service")));
  paths["/v1/services/{name}"]["parameters"] = {PathParam("name")};
  paths["/v1/services/{name}/replicas"]["get"] =
      Op("The service's replicas (live ones, then the last ended), by version and ordinal",
         JsonResponse("a page", page_of("replicas", "Replica")));
  paths["/v1/services/{name}/replicas"]["get"]["parameters"] = {
      QueryParam("after", "string", "next_after of the previous page"),
      QueryParam("limit", "integer", "1..1000, default 100")};
  paths["/v1/services/{name}/replicas"]["parameters"] = {PathParam("name")};
  paths["/v1/services/{name}/traffic"]["post"] =
      Op("Set the versions' weights (percent, summing to 100; versions not named get 0): rollback and promote",
         JsonResponse("the weights", {{"type", "object"}, {"properties", {{"weights", int_map}}}}));
  paths["/v1/services/{name}/traffic"]["post"]["requestBody"] =
      Body({{"type", "object"}, {"required", {"weights"}}, {"properties", {{"weights", int_map}}}});
  paths["/v1/services/{name}/traffic"]["parameters"] = {PathParam("name")};
  paths["/v1/services/{name}/scale"]["post"] = Op(
      "Set the desired replicas of versions (the total within the spec's replicas.min..max)",
      JsonResponse("every version's desired replicas", {{"type", "object"}, {"properties", {{"replicas", int_map}}}}));
  paths["/v1/services/{name}/scale"]["post"]["requestBody"] =
      Body({{"type", "object"}, {"required", {"replicas"}}, {"properties", {{"replicas", int_map}}}});
  paths["/v1/services/{name}/scale"]["parameters"] = {PathParam("name")};
  paths["/v1/endpoints"]["get"] = Op(
      "Every service's READY replicas in the gateways' route shape (gateway/endpoint_sync.h)",
      JsonResponse("the routes", {{"type", "object"},
                                  {"properties", {{"routes", {{"type", "array"}, {"items", {{"type", "object"}}}}}}}}));

  // Who may call what (access.h): the security requirement and error answers of each operation.
  schemas["AuditRecord"] = {
      {"type", "object"},
      {"description",
       "One state-changing call (any method but GET), whatever its outcome. Holds no token, secret "
       "or request body"},
      {"properties",
       {{"seq", {{"type", "integer"}, {"format", "int64"}, {"description", "strictly increasing in commit order"}}},
        {"time", {{"type", "string"}, {"format", "date-time"}, {"description", "when it was answered (wall clock)"}}},
        {"user", {{"type", "string"}, {"description", "\"\" when the call carried no valid token (401)"}}},
        {"tenant", {{"type", "string"}}},
        {"token_id", {{"type", "string"}, {"description", "the public id of the token it presented"}}},
        {"role", {{"type", "string"}}},
        {"method", {{"type", "string"}, {"example", "POST"}}},
        {"route", {{"type", "string"}, {"example", "/v1/jobs/{id}/cancel"}}},
        {"path", {{"type", "string"}, {"example", "/v1/jobs/j-000042/cancel"}}},
        {"status", {{"type", "integer"}, {"description", "the HTTP status it was answered with"}}},
        {"remote_address", {{"type", "string"}, {"example", "10.0.0.7:51234"}}},
        {"request_id", {{"type", "string"}, {"description", "the X-Request-Id header, if any"}}}}}};
  paths["/v1/audit"]["get"] =
      Op("The audit log: every state-changing call (who, what, when, from where), oldest first; page with "
         "after=next_after",
         JsonResponse("a page", {{"type", "object"},
                                 {"properties",
                                  {{"records", {{"type", "array"}, {"items", Ref("AuditRecord")}}},
                                   {"next_after", {{"type", "integer"}, {"nullable", true}}}}}}));
  paths["/v1/audit"]["get"]["parameters"] = {QueryParam("after", "integer", "records after this seq"),
                                             QueryParam("user", "string", "only this user's calls"),
                                             QueryParam("tenant", "string", "only calls of this tenant's users"),
                                             QueryParam("limit", "integer", "1..1000, default 100")};

  // Who may call what (access.h): the security requirement and error answers of each operation, and its
  // name and tag.
  J tags = J::array();
  for (const auto& [name, description] : kTags) tags.push_back({{"name", name}, {"description", description}});
  for (const RouteAccess& r : RouteAccessTable()) {
    std::string method(r.method);
    for (char& c : method) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    J& op = paths[std::string(r.pattern)][method];
    op["x-gpugeek-access"] = std::string(AccessName(r.access));
    op["operationId"] = DerivedOperationId(r.method, r.pattern);
    std::string tag = "system";
    for (const OperationName& n : kOperationNames) {
      if (n.method == r.method && n.pattern == r.pattern) {
        op["operationId"] = std::string(n.operation_id);
        tag = n.tag;
      }
    }
    op["tags"] = {tag};
    if (!op.contains("summary")) op["summary"] = fmt::format("{} {}", r.method, r.pattern);
    if (r.access == Access::kPublic) {
      op["security"] = J::array();
      continue;
    }
    if (r.access == Access::kNode) {
      op["security"] = J::array({{{"nodeCredential", J::array()}}});
      op["responses"]["401"] = JsonResponse("no valid node credential (or join token, to register)", Ref("Error"));
      op["responses"]["403"] = JsonResponse("another node's credential", Ref("Error"));
      continue;
    }
    op["security"] = J::array({{{"bearerAuth", J::array()}}});
    op["responses"]["401"] = JsonResponse("no token, or not a valid one", Ref("Error"));
    op["responses"]["403"] = JsonResponse("the token's role is below this call's", Ref("Error"));
    if (!op["responses"].contains("404")) op["responses"]["404"] = JsonResponse("not found", Ref("Error"));
  }
  J security_schemes = {
      {"bearerAuth",
       {{"type", "http"},
        {"scheme", "bearer"},
        {"bearerFormat", "ggk_<16 hex>_<43 base64url>"},
        {"description", "An API token (`gpugeek tokens create`); objects of another tenant answer 404"}}},
      {"nodeCredential",
       {{"type", "http"},
        {"scheme", "bearer"},
        {"bearerFormat", "ggn_<generation>_<hmac>_<node>, or ggj_... to join"},
        {"description", "An agent's node credential, received at its first registration for a join token"}}}};

  return {{"openapi", "3.0.3"},
          {"info",
           {{"title", "gpugeek control plane"},
            {"version", kVersion},
            {"description",
             "The REST API of `gpugeek server`: jobs, nodes and the GPU pool, accounts and the audit log. Every "
             "call but health and this document needs an API token (`Authorization: Bearer ...`); each "
             "operation's `x-gpugeek-access` names the least role it needs (public, viewer, member, admin, or node "
             "for the agents' listener). Errors are JSON objects `{code, message, details}`."},
            // The repository has no licence file yet: no licence is granted (npm's UNLICENSED convention).
            {"license", {{"name", "UNLICENSED"}}}}},
          // Relative: the paths are served by whichever host this document was fetched from (the agents'
          // routes by its agents' listener, on its own port).
          {"servers", J::array({{{"url", "/"}, {"description", "the server this document was fetched from"}}})},
          {"tags", tags},
          {"security", J::array({{{"bearerAuth", J::array()}}})},
          {"paths", paths},
          {"components", {{"schemas", schemas}, {"securitySchemes", security_schemes}}}};
}

}  // namespace

const J& OpenApiDocument() {
  static const J* doc = new J(Build());
  return *doc;
}

}  // namespace gpugeek::controlplane
