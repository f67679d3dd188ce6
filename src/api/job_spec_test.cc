#include "api/job_spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace gpugeek::api {
namespace {

constexpr char kArchitectureExample[] = R"(
name: llama2-70b-lora
model: llama/Llama-2-70b-hf.json
task: {kind: lora, seq_len: 4096, micro_batch: 1, tokens: 2e8}
resources:
  accelerators: A100-80GB:4
  spot: true
  regions: [cn-east-1]
num_nodes: 1
checkpoint: {dir: /ckpt/llama2, grace: 30s}
env: {HF_HOME: /cache}
run: torchrun --nproc-per-node $GPUGEEK_GPUS_PER_NODE train.py
)";

TEST(ParseJobSpec, ArchitectureDocumentExample) {
  auto spec = ParseJobSpec(kArchitectureExample);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "llama2-70b-lora");
  EXPECT_EQ(spec->model, "llama/Llama-2-70b-hf.json");
  ASSERT_TRUE(spec->task.has_value());
  EXPECT_EQ(spec->task->kind, TaskKind::kLora);
  EXPECT_EQ(spec->task->seq_len, 4096);
  EXPECT_EQ(spec->task->tokens, 200'000'000);
  ASSERT_EQ(spec->resources.any_of.size(), 1u);
  EXPECT_EQ(spec->resources.any_of[0].model, "A100-SXM-80GB");  // resolved through the catalog
  EXPECT_EQ(spec->resources.any_of[0].count, 4);
  EXPECT_EQ(spec->resources.capacity, std::vector<CapacityType>{CapacityType::kSpot});
  EXPECT_EQ(spec->resources.regions, std::vector<std::string>{"cn-east-1"});
  EXPECT_EQ(spec->checkpoint.dir, "/ckpt/llama2");
  EXPECT_EQ(spec->checkpoint.grace, std::chrono::seconds(30));
  EXPECT_EQ(spec->env.at("HF_HOME"), "/cache");
  EXPECT_EQ(spec->num_nodes, 1);
}

TEST(ParseJobSpec, EnvRefersToSecretsByName) {
  auto spec = ParseJobSpec(
      "name: s\nresources: {accelerators: H100-SXM-80GB:1}\nenv: {HF_HOME: /cache, HF_TOKEN: {secret: hf}}\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->env, (std::map<std::string, std::string>{{"HF_HOME", "/cache"}}));
  EXPECT_EQ(spec->secret_env, (std::map<std::string, std::string>{{"HF_TOKEN", "hf"}}));
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToYaml(*spec);
  EXPECT_EQ(again->secret_env, spec->secret_env);
  EXPECT_EQ(again->env, spec->env);
  for (const char* bad : {"{secret: hf, x: 1}", "{value: hf}", "{secret: 'a/b'}", "{secret: [a]}"}) {
    auto b = ParseJobSpec(std::string("name: s\nresources: {accelerators: H100-SXM-80GB:1}\nenv: {HF_TOKEN: ") + bad +
                          "}\nrun: x\n");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(absl::StartsWith(b.status().message(), "env.HF_TOKEN")) << b.status();
  }
}

TEST(ParseJobSpec, AlternativesFractionsAndUnits) {
  auto spec = ParseJobSpec(R"(
name: serve
resources:
  accelerators: [H100-SXM-80GB:2, "NVIDIA H200:1", T4:0.5]
  capacity: reserved
  cpus: 500m
  memory: 64Gi
run: echo hi
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& a = spec->resources.any_of;
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].model, "H200-SXM-141GB");
  EXPECT_EQ(a[2].model, "T4");
  EXPECT_EQ(a[2].count, 1);
  EXPECT_EQ(a[2].milli_per_gpu, 500);
  EXPECT_EQ(spec->resources.cpu_milli, 500);
  EXPECT_EQ(spec->resources.memory_bytes, 64ull << 30);
  EXPECT_EQ(spec->resources.capacity, std::vector<CapacityType>{CapacityType::kReserved});
}

// "A100:1" used to mean the 40 GB part silently (the catalog's alias): a family whose models differ in
// memory (catalog: A100 40/80 GB, V100 16/32 GB, H100 80/94 GB) must be named exactly.
TEST(ParseAcceleratorRequest, AFamilyOfSeveralMemorySizesIsAmbiguous) {
  auto a100 = ParseAcceleratorRequest("A100:1", hw::GpuCatalog::Builtin());
  ASSERT_EQ(a100.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a100.status().message(),
            "GPU model 'A100' is ambiguous: it may mean A100-PCIe-40GB (40 GiB), A100-PCIe-80GB (80 GiB), "
            "A100-SXM-40GB (40 GiB), A100-SXM-80GB (80 GiB); name one of them (`gpugeek catalog`), e.g. "
            "A100-SXM-80GB:1");
  for (const char* name : {"V100:2", "h100", "H100:8"}) {
    EXPECT_EQ(ParseAcceleratorRequest(name, hw::GpuCatalog::Builtin()).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  // One memory size, a catalog id, an alias of one model, a vendor name: fine.
  for (const auto& [name, id] : std::vector<std::pair<const char*, const char*>>{{"A100-80GB:4", "A100-SXM-80GB"},
                                                                                 {"a100-sxm-40gb", "A100-SXM-40GB"},
                                                                                 {"H100-PCIe:1", "H100-PCIe-80GB"},
                                                                                 {"T4:0.5", "T4"},
                                                                                 {"A10:1", "A10"},
                                                                                 {"MI300X:8", "MI300X"},
                                                                                 {"NVIDIA H200:1", "H200-SXM-141GB"}}) {
    auto r = ParseAcceleratorRequest(name, hw::GpuCatalog::Builtin());
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    EXPECT_EQ(r->model, id) << name;
  }
  auto in_spec = ParseJobSpec("name: x\nresources: {accelerators: A100:1}\nrun: x\n");
  EXPECT_TRUE(absl::StartsWith(in_spec.status().message(), "resources.accelerators")) << in_spec.status();
}

struct BadCase {
  const char* yaml;
  const char* expected_prefix;  // the message must start with the field path
};

// `capacity: [spot, on-demand]`: the types accepted, most preferred first; it survives the round trip.
TEST(ParseJobSpec, CapacityPreferenceListKeepsItsOrder) {
  auto spec = ParseJobSpec("name: x\nrun: a\nresources: {accelerators: T4:1, capacity: [spot, on-demand]}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->resources.capacity, (std::vector<CapacityType>{CapacityType::kSpot, CapacityType::kOnDemand}));
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status() << JobSpecToYaml(*spec);
  EXPECT_EQ(again->resources.capacity, spec->resources.capacity);
}

TEST(ParseJobSpec, BadInputNamesTheField) {
  const BadCase cases[] = {
      {"name: x\nrun: a\nresources: {accelerators: A100-80GB:4}\ncolour: red\n", "colour: unknown field"},
      {"name: x\nrun: a\nresources: {acelerators: A100-80GB:4}\n", "resources.acelerators: unknown field"},
      {"name: Bad_Name\nrun: a\nresources: {accelerators: T4:1}\n", "name: = 'Bad_Name'"},
      {"name: x\nresources: {accelerators: T4:1}\n", "run: is required"},
      {"name: x\nrun: a\n", "resources.accelerators: is required unless"},
      {"name: x\nrun: a\nresources: {accelerators: [T4:1, Z80:2]}\n",
       "resources.accelerators[1]: unknown GPU model 'Z80'"},
      {"name: x\nrun: a\nresources: {accelerators: T4:0}\n", "resources.accelerators: 'T4:0': the count"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, memory: 12 parsecs}\n", "resources.memory:"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, spot: true, capacity: reserved}\n",
       "resources.capacity: contradicts"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, capacity: [spot, cheap]}\n", "resources.capacity[1]:"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, capacity: [spot, spot]}\n",
       "resources.capacity[1]: spot is listed twice"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, capacity: []}\n", "resources.capacity: a preference list"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1}\nnum_nodes: 0\n", "num_nodes: = 0 must be between 1"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1}\ncheckpoint: {grace: soon}\n", "checkpoint.grace:"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1}\nenv: {GPUGEEK_RANK: 3}\n", "env.GPUGEEK_RANK:"},
      {"name: x\nrun: a\ntask: {kind: lora}\nresources: {accelerators: T4:1}\n", "model: is required when task"},
      {"name: x\nrun: a\nmodel: m.json\ntask: {kind: dance}\n", "task.kind: = 'dance'"},
      {"name: [x]\nrun: a\n", "name: must be a single value"},
      {"- a\n- b\n", "(document): a job spec must be a YAML mapping"},
      {"name: x\n  run: : :\n\t- [", "job spec is not valid YAML (line"},
      {"name: x\nrun: a\npriority: 1\nresources: {accelerators: T4:1}\npriority: 9\n",
       "priority: the key appears twice in the job spec (lines 3 and 5); keep one"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, regions: [eu-west, \"\"]}\n",
       "resources.regions[1]: is empty: name a region"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, span_regions: maybe}\n", "resources.span_regions:"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, data_region: \"\"}\n",
       "resources.data_region: is empty: name the region of the job's data, e.g. us-east-1"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1}\n---\nname: y\nrun: b\n",
       "job spec holds more than one YAML document (separated by ---); submit one job per file"},
      {"name: x\nrun: a\nresources: {accelerators: T4:1, accelerators: A100-80GB:1}\n",
       "resources.accelerators: the key appears twice in the job spec (lines 3 and 3)"},
  };
  for (const BadCase& c : cases) {
    auto spec = ParseJobSpec(c.yaml);
    ASSERT_FALSE(spec.ok()) << c.yaml;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(spec.status().message(), c.expected_prefix))
        << "got: " << spec.status().message() << "\nwant prefix: " << c.expected_prefix;
  }
}

std::string EnvError(const std::string& name) {
  auto spec = ParseJobSpec("name: x\nrun: a\nresources: {accelerators: T4:1}\nenv: {" + name + ": v}\n");
  if (spec.ok()) return "accepted";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(ParseJobSpec, EnvThatSteersTheLoaderOrTheLauncherIsRefusedWithTheFix) {
  const std::string export_in_run =
      ", so a job spec cannot set it; if your program needs it, export it in run (run: export NAME=value; python "
      "train.py), which reaches your own programs only";
  const std::string loader =
      "LD_* variables steer the dynamic loader of every program of the job, gpugeek's launcher "
      "included" +
      export_in_run;
  EXPECT_EQ(EnvError("LD_PRELOAD"), "env.LD_PRELOAD: " + loader);
  EXPECT_EQ(EnvError("LD_LIBRARY_PATH"), "env.LD_LIBRARY_PATH: " + loader);
  EXPECT_EQ(EnvError("LD_AUDIT"), "env.LD_AUDIT: " + loader);
  EXPECT_EQ(EnvError("LD_BIND_NOW"), "env.LD_BIND_NOW: " + loader);
  EXPECT_EQ(EnvError("GCONV_PATH"),
            "env.GCONV_PATH: GCONV_PATH makes libc load code or data of the spec's choosing into every program of the "
            "job, gpugeek's launcher included" +
                export_in_run);
  EXPECT_EQ(EnvError("GLIBC_TUNABLES"),
            "env.GLIBC_TUNABLES: GLIBC_TUNABLES makes libc load code or data of the spec's choosing into every "
            "program of the job, gpugeek's launcher included" +
                export_in_run);
  EXPECT_EQ(EnvError("NLSPATH").substr(0, 20), "env.NLSPATH: NLSPATH");
  EXPECT_EQ(EnvError("LOCPATH").substr(0, 20), "env.LOCPATH: LOCPATH");
  EXPECT_EQ(EnvError("DYLD_INSERT_LIBRARIES"),
            "env.DYLD_INSERT_LIBRARIES: DYLD_* variables are macOS loader hooks, so a job spec cannot set it; remove "
            "it (it has no effect on Linux)");
  for (const char* shell : {"BASH_ENV", "ENV", "IFS"}) {
    EXPECT_EQ(EnvError(shell), fmt::format("env.{0}: {0} changes what gpugeek's launcher shell runs before or instead "
                                           "of your command, so a job spec cannot set it; put the setup in run itself "
                                           "(run: source setup.sh; python train.py)",
                                           shell));
  }
}

TEST(ParseJobSpec, EnvThatGpugeekSetsIsRefused) {
  EXPECT_EQ(EnvError("GPUGEEK_RANK"),
            "env.GPUGEEK_RANK: GPUGEEK_* variables are set by gpugeek, so a job spec cannot set it; pick another name");
  for (const char* gpus :
       {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    EXPECT_EQ(EnvError(gpus),
              fmt::format("env.{0}: {0} is set by gpugeek from the GPUs the job was given, so a job spec "
                          "cannot set it; ask for GPUs in resources.accelerators instead",
                          gpus));
  }
  EXPECT_EQ(EnvError("HOME"),
            "env.HOME: HOME is set by gpugeek to the job's own working directory, so a job spec cannot set it; point "
            "caches elsewhere with their own variables (HF_HOME, XDG_CACHE_HOME, TORCH_HOME)");
  EXPECT_EQ(EnvError("1X"), "env.1X: names must be letters, digits and '_', not starting with a digit");
}

TEST(ParseJobSpec, EnvThatMlJobsNeedIsAllowed) {
  for (const char* ok : {"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONSTARTUP", "MALLOC_ARENA_MAX", "PATH", "HF_HOME",
                         "NCCL_DEBUG", "OMP_NUM_THREADS", "XLD_PRELOAD", "CUDA_HOME", "TMPDIR"}) {
    EXPECT_EQ(EnvError(ok), "accepted") << ok;
    EXPECT_TRUE(CheckJobEnvName(ok).ok()) << ok;
  }
  // The same check on its own, for env that reaches an agent without a spec.
  EXPECT_EQ(CheckJobEnvName("LD_PRELOAD").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckJobEnvName(std::string(100, 'A') + "=").message().substr(0, 73),
            "env." + std::string(64, 'A') + "...: ");
}

TEST(ParseJobSpec, TrailingDocumentMarkerIsNotASecondJob) {
  EXPECT_TRUE(ParseJobSpec("---\nname: x\nrun: a\nresources: {accelerators: T4:1}\n---\n").ok());
}

// Found by the fuzzer (a timeout): yaml-cpp 0.7's LoadAll never returns on this 50-byte input (a tag
// then a flow separator); reading at most two documents does.
TEST(ParseJobSpec, InputThatHangsYamlLoadAllIsRefusedAtOnce) {
  const std::string input = "!" + std::string(24, 'y') + "," + std::string(23, 'y') + "2";
  EXPECT_FALSE(ParseJobSpec(input).ok());
}

// Reading every document of a stream of `---` lines would take seconds.
TEST(ParseJobSpec, ManyDocumentMarkersAreReadOnlyAsFarAsTheSecond) {
  std::string many = "name: x\nrun: a\nresources: {accelerators: T4:1}\n";
  for (int i = 0; i < 100000; ++i) many += "---\n";
  many += "name: y\n";
  EXPECT_TRUE(ParseJobSpec(many).ok());  // the second document is empty: the rest is never read
}

// The classic "billion laughs": nine levels of nine aliases, 342 bytes, 9^9 values once expanded.
std::string AliasBomb() {
  std::string bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    bomb += fmt::format("{0}: &{0} [", level);
    for (int i = 0; i < 9; ++i) bomb += fmt::format("{}*{}", i ? "," : "", static_cast<char>(level - 1));
    bomb += "]\n";
  }
  return bomb;
}

std::string ErrorOf(std::string_view yaml) {
  auto spec = ParseJobSpec(yaml);
  if (spec.ok()) return "(ok)";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(ParseJobSpec, OversizedSpecIsRefusedBeforeParsing) {
  EXPECT_EQ(ErrorOf(std::string(16 << 20, '#')),
            "spec: 16777216 bytes is over the 1 MiB limit; keep large data in files the job reads");
  const std::string head = "name: x\nrun: a\nresources: {accelerators: T4:1}\n";
  EXPECT_EQ(ErrorOf(head + std::string((1 << 20) + 1 - head.size(), '#')),
            "spec: 1048577 bytes is over the 1 MiB limit; keep large data in files the job reads");
  EXPECT_EQ(ErrorOf(head + std::string((1 << 20) - head.size(), '#')), "(ok)");  // a comment up to the limit
}

TEST(ParseJobSpec, AliasBombIsRefusedByTheWalkBudget) {
  EXPECT_EQ(ErrorOf(AliasBomb()),
            "spec: the YAML holds more than 100000 values, each alias (*name) counting as a copy of what it names; "
            "use fewer aliases or write a smaller spec");
  // The bomb under a known field, after a valid spec: the walk still comes before the schema.
  EXPECT_EQ(ErrorOf("name: x\nrun: a\nresources: {accelerators: T4:1}\nenv:\n  A: &a [1,1,1,1,1,1,1,1,1,1]\n"
                    "  B: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  C: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                    "  D: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  E: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"),
            "spec: the YAML holds more than 100000 values, each alias (*name) counting as a copy of what it names; "
            "use fewer aliases or write a smaller spec");
}

TEST(ParseJobSpec, LongKeysRepeatedByAliasesAreRefused) {
  // A plain key is at most 1024 characters; an explicit one (`? key`) is not.
  std::string yaml = "a: &a\n  ? " + std::string(100'000, 'k') + "\n  : 1\nb: [";
  for (int i = 0; i < 100; ++i) yaml += i ? ",*a" : "*a";
  yaml += "]\n";
  EXPECT_EQ(ErrorOf(yaml),
            "spec: the YAML holds more than 8388608 bytes of keys once its aliases (*name) are expanded; use fewer "
            "aliases or shorter keys");
}

TEST(ParseJobSpec, SelfReferencingAliasIsRefusedByTheDepthLimit) {
  EXPECT_EQ(ErrorOf("a: &a [*a]\n"), "spec: the YAML nests deeper than 64 levels (line 1); flatten it");
}

TEST(ParseJobSpec, NestingDeeperThan64IsRefused) {
  const std::string head = "name: x\nrun: a\nresources: {accelerators: T4:1}\nx: ";
  EXPECT_EQ(ErrorOf(head + std::string(64, '[') + std::string(64, ']') + "\n"),
            "spec: the YAML nests deeper than 64 levels (line 4); flatten it");
  // 63 lists under the top-level mapping: 64 levels, the most allowed; the schema then refuses `x`.
  EXPECT_EQ(ErrorOf(head + std::string(63, '[') + std::string(63, ']') + "\n"),
            "x: unknown field; allowed here: name, model, task, resources, num_nodes, priority, checkpoint, env, "
            "workdir, workdir_digest, files, file_archives, setup, run, retry, max_duration, idle_timeout, launcher, "
            "procs_per_node, image, engine, elastic, dataset, weights, weights_signer, weights_signer_pem, max_cost, "
            "max_price");
}

// yaml-cpp's scanner would queue a token per unclosed '[' (137 MiB for these 500,000) before its parser
// refused the depth; the text is refused before yaml-cpp sees it.
TEST(ParseJobSpec, DeepFlowNestingIsRefusedBeforeScanning) {
  const std::string head = "name: x\nrun: a\nresources: {accelerators: T4:1}\nx: ";
  EXPECT_EQ(ErrorOf(head + std::string(500'000, '[') + std::string(500'000, ']') + "\n"),
            "spec: the YAML has 500001 '[' and '{' characters; at most 10000 are allowed (flow collections nest at "
            "most 64 levels): write a smaller spec");
  // 10,000 in all (one in `head`) pass the count; yaml-cpp's own depth guard then refuses them.
  EXPECT_EQ(ErrorOf(head + std::string(9'999, '[') + std::string(9'999, ']') + "\n"),
            "job spec is not valid YAML (line 4, column 20002): bad file");
  EXPECT_EQ(ErrorOf(head + std::string(100, '[') + std::string(100, ']') + "\n"),
            "spec: the YAML nests deeper than 64 levels (line 4); flatten it");
}

// Loading 500,000 list items would build a 225 MiB tree before the walk refused it; the event pass
// counts them without a tree.
TEST(ParseJobSpec, ManyValuesAreRefusedBeforeLoading) {
  std::string yaml = "name: x\nrun: a\nresources: {accelerators: T4:1}\nx: [";
  for (int i = 0; i < 500'000; ++i) yaml += "1,";
  yaml += "1]\n";
  EXPECT_EQ(ErrorOf(yaml),
            "spec: the YAML holds more than 100000 values, each alias (*name) counting as a copy of what it names; "
            "use fewer aliases or write a smaller spec");
  // Counted as the walk counts: the root, 4 values, the list and 99,994 items are 100,000 values, the
  // most allowed (the schema then refuses `x`); one item more is too many.
  const auto list_of = [](int items) {
    std::string text = "name: x\nrun: a\nresources: {accelerators: T4:1}\nx: [";
    for (int i = 0; i < items; ++i) text += i ? ",1" : "1";
    return text + "]\n";
  };
  EXPECT_EQ(ErrorOf(list_of(99'994)),
            "x: unknown field; allowed here: name, model, task, resources, num_nodes, priority, checkpoint, env, "
            "workdir, workdir_digest, files, file_archives, setup, run, retry, max_duration, idle_timeout, launcher, "
            "procs_per_node, image, engine, elastic, dataset, weights, weights_signer, weights_signer_pem, max_cost, "
            "max_price");
  EXPECT_EQ(ErrorOf(list_of(99'995)),
            "spec: the YAML holds more than 100000 values, each alias (*name) counting as a copy of what it names; "
            "use fewer aliases or write a smaller spec");
  // Keys do not count: a mapping of 60,000 entries holds 60,000 values.
  std::string map = "name: x\nrun: a\nresources: {accelerators: T4:1}\nenv: {";
  for (int i = 0; i < 60'000; ++i) map += fmt::format("{}K{}: v", i ? ", " : "", i);
  EXPECT_EQ(ErrorOf(map + "}\n"), "(ok)");
}

TEST(ParseJobSpec, AnchorsAndAliasesStillWork) {
  auto spec = ParseJobSpec(
      "name: x\nrun: &cmd python train.py\nresources: {accelerators: &gpu T4:1, regions: [&r eu-west-1, *r]}\n"
      "env: {CMD: *cmd}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->env.at("CMD"), "python train.py");
  EXPECT_EQ(spec->resources.regions, (std::vector<std::string>{"eu-west-1", "eu-west-1"}));
}

TEST(ParseJobSpec, BadNameIsQuotedEscapedAndBounded) {
  EXPECT_EQ(ErrorOf("name: \"x\\e[2J\"\nrun: a\nresources: {accelerators: T4:1}\n"),
            "name: = 'x\\x1b[2J' must be 1-63 lower-case letters, digits or '-', starting and ending with a letter "
            "or digit (e.g. llama2-70b-lora)");
  EXPECT_EQ(ErrorOf("name: " + std::string(100'000, 'n') + "\nrun: a\nresources: {accelerators: T4:1}\n"),
            "name: = '" + std::string(64, 'n') +
                "...' (100000 bytes) must be 1-63 lower-case letters, digits or '-', starting and ending with a "
                "letter or digit (e.g. llama2-70b-lora)");
}

TEST(ParseJobSpec, PlannerSizedSpecNeedsNoAccelerators) {
  auto spec = ParseJobSpec("name: x\nrun: a\nmodel: m.json\ntask: {kind: inference}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->resources.any_of.empty());
}

// A job's own budget (docs/billing.md): money with up to six decimals, kept in micro-units, written back
// exactly.
TEST(ParseJobSpec, MaxCostAndMaxPrice) {
  auto spec =
      ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nmax_cost: 5.00\nmax_price: \"0.000001\"\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->max_cost_micros, 5'000'000);
  EXPECT_EQ(spec->max_price_micros, 1);
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status() << JobSpecToYaml(*spec);
  EXPECT_EQ(again->max_cost_micros, 5'000'000);
  EXPECT_EQ(again->max_price_micros, 1);
  spec = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nrun: x\n");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->max_cost_micros.has_value());
  for (const std::string bad : {"max_cost: 0", "max_cost: -1", "max_cost: 1e3", "max_price: 0.0000001",
                                "max_price: [2]", "max_cost: 1000000001"}) {
    EXPECT_TRUE(absl::StartsWith(ErrorOf("name: t\nresources: {accelerators: T4:1}\n" + bad + "\nrun: x\n"),
                                 bad.substr(0, bad.find(':')) + ":"))
        << bad;
  }
  EXPECT_EQ(ErrorOf("name: t\nresources: {accelerators: T4:1}\nmax_cost: lots\nrun: x\n"),
            "max_cost: must be an amount of the pool's currency above 0, with up to six decimals, e.g. 5.00");
}

TEST(ParseJobSpec, RetryPolicyAndMaxDuration) {
  auto spec = ParseJobSpec(R"(
name: train
resources: {accelerators: H100-SXM-80GB:8}
retry: {on: [node-failure, error], limit: 2, backoff: 10s..5m}
max_duration: 90m
idle_timeout: 15m
run: python train.py
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->retry.has_value());
  EXPECT_EQ(spec->retry->on, (std::vector<RetryCause>{RetryCause::kError, RetryCause::kNodeFailure}));
  EXPECT_EQ(spec->retry->limit, 2);
  EXPECT_EQ(spec->retry->backoff_min, std::chrono::seconds(10));
  EXPECT_EQ(spec->retry->backoff_max, std::chrono::minutes(5));
  EXPECT_EQ(spec->max_duration, std::chrono::minutes(90));
  EXPECT_EQ(spec->idle_timeout, std::chrono::minutes(15));
  // Defaults: limit 3, 10s..10m; a single duration is a fixed wait.
  spec = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nretry: {on: [preemption], backoff: 30s}\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->retry->limit, 3);
  EXPECT_EQ(spec->retry->backoff_min, std::chrono::seconds(30));
  EXPECT_EQ(spec->retry->backoff_max, std::chrono::seconds(30));
  spec = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->retry.has_value());
  EXPECT_FALSE(spec->max_duration.has_value());
  EXPECT_FALSE(spec->idle_timeout.has_value());

  for (const auto& [yaml, message] : std::vector<std::pair<std::string, std::string>>{
           {"retry: {limit: 2}", "retry.on: is required"},
           {"retry: {on: [oom]}", "retry.on[0]: 'oom' is not a cause"},
           {"retry: {on: []}", "retry.on: must be a list of one to three causes"},
           {"retry: {on: [error], limit: 0}", "retry.limit"},
           {"retry: {on: [error], backoff: 5m..10s}", "retry.backoff: needs 0 <= first <= second"},
           {"retry: {on: [error], backoff: soon}", "retry.backoff: must be a duration"},
           {"retry: {on: [error], every: 1s}", "retry"},
           {"max_duration: forever", "max_duration: must be a duration"},
           {"max_duration: 0s", "max_duration: must be between 1s and 365 days"},
           {"idle_timeout: [1m]", "idle_timeout:"},
           {"idle_timeout: later", "idle_timeout: must be a duration"},
           {"idle_timeout: 0s", "idle_timeout: must be between 1s and 365 days"},
           {"launcher: mpi", "launcher: must be torch"},
           {"procs_per_node: 2", "procs_per_node: needs a launcher"},
           {"launcher: torch\nprocs_per_node: 65", "procs_per_node"}}) {
    auto bad = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\n" + yaml + "\nrun: x\n");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_TRUE(absl::StartsWith(bad.status().message(), message)) << yaml << " -> " << bad.status();
  }
}

TEST(ParseJobSpec, WorkdirSetupAndDigest) {
  const std::string digest(64, 'a');
  auto spec =
      ParseJobSpec("name: w\nresources: {accelerators: H100-SXM-80GB:1}\nworkdir: .\nworkdir_digest: " + digest +
                   "\nsetup: |\n  pip install -r requirements.txt\n  echo ok\nrun: python train.py\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workdir, ".");
  EXPECT_EQ(spec->workdir_digest, digest);
  EXPECT_EQ(spec->setup, "pip install -r requirements.txt\necho ok\n");
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->workdir, ".");
  EXPECT_EQ(again->workdir_digest, digest);
  EXPECT_EQ(again->setup, spec->setup);
  const std::string head = "name: w\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n";
  struct Bad {
    std::string yaml, prefix;
  };
  for (const Bad& b :
       std::vector<Bad>{{"workdir: ''\n", "workdir: must be a folder path"},
                        {"workdir: [a]\n", "workdir: must be a single value"},
                        {"workdir_digest: abc\n", "workdir_digest: must be the workdir archive's SHA-256"},
                        {"workdir_digest: " + std::string(64, 'A') + "\n", "workdir_digest: must be"},
                        {"setup: '  '\n", "setup: must not be empty"}}) {
    auto r = ParseJobSpec(head + b.yaml);
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), b.prefix)) << r.status();
  }
}

TEST(ParseJobSpec, FilesAndFileArchives) {
  const std::string digest(64, 'c');
  auto spec = ParseJobSpec(
      "name: f\nresources: {accelerators: H100-SXM-80GB:1}\nfiles: {data/corpus: ../corpus, w.bin: /tmp/w.bin}\n"
      "file_archives: [{path: data, digest: " +
      digest + "}, {digest: " + digest + "}]\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->files, (std::map<std::string, std::string>{{"data/corpus", "../corpus"}, {"w.bin", "/tmp/w.bin"}}));
  EXPECT_EQ(spec->file_archives, (std::vector<FileArchive>{{"data", digest}, {"", digest}}));
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->files, spec->files);
  EXPECT_EQ(again->file_archives, spec->file_archives);
  const std::string head = "name: f\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n";
  for (const auto& [yaml, prefix] : std::vector<std::pair<std::string, std::string>>{
           {"files: {../up: a}\n", "files.../up: the destination must be a path inside the working folder"},
           {"files: {/abs: a}\n", "files./abs: the destination must be a path inside the working folder"},
           {"files: {a//b: a}\n", "files.a//b: the destination must be"},
           {"files: {a: ''}\n", "files.a: must name a file, folder or archive"},
           {"files: [a]\n", "files: must be a mapping of 1 to 64 entries"},
           {"file_archives: [{path: data}]\n", "file_archives[0].digest: is required"},
           {"file_archives: [{path: ../x, digest: " + digest + "}]\n", "file_archives[0].path: must be a folder"},
           {"file_archives: [{digest: abc}]\n", "file_archives[0].digest: must be an uploaded archive's SHA-256"},
           {"file_archives: [{digest: " + digest + ", mode: x}]\n", "file_archives[0].mode: unknown field"}}) {
    auto r = ParseJobSpec(head + yaml);
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), prefix)) << yaml << " -> " << r.status();
  }
}

TEST(JobSpecToYaml, RoundTripsToAnEqualSpec) {
  auto spec = ParseJobSpec(kArchitectureExample);
  ASSERT_TRUE(spec.ok());
  spec->resources.any_of.push_back({"T4", 1, 250});
  spec->resources.memory_bytes = 123456789;
  spec->resources.cpu_milli = 2500;
  spec->env["QUOTED"] = "a: b # not a comment";
  spec->retry = RetrySpec{.on = {RetryCause::kError, RetryCause::kPreemption}, .limit = 5};
  spec->max_duration = std::chrono::hours(2);
  spec->idle_timeout = std::chrono::minutes(20);
  spec->launcher = "torch";
  spec->procs_per_node = 2;
  spec->image = "localhost/pytorch:bookworm";
  spec->resources.span_regions = true;
  spec->resources.data_region = "us-east-1";
  spec->num_nodes = 3;
  spec->elastic = ElasticSpec{.min_nodes = 2};
  const std::string yaml = JobSpecToYaml(*spec);
  auto again = ParseJobSpec(yaml);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_EQ(JobSpecToYaml(*again), yaml);
  EXPECT_EQ(again->resources.any_of[1].milli_per_gpu, 250);
  EXPECT_EQ(again->env.at("QUOTED"), "a: b # not a comment");
  EXPECT_EQ(again->run, spec->run);
  ASSERT_TRUE(again->retry.has_value());
  EXPECT_EQ(again->retry->on, spec->retry->on);
  EXPECT_EQ(again->retry->limit, 5);
  EXPECT_EQ(again->retry->backoff_max, std::chrono::minutes(10));
  EXPECT_EQ(again->max_duration, std::chrono::hours(2));
  EXPECT_EQ(again->idle_timeout, std::chrono::minutes(20));
  EXPECT_EQ(again->launcher, "torch");
  EXPECT_EQ(again->procs_per_node, 2);
  EXPECT_EQ(again->image, "localhost/pytorch:bookworm");
  EXPECT_TRUE(again->resources.span_regions);
  EXPECT_EQ(again->resources.data_region, "us-east-1");
  EXPECT_EQ(again->elastic, (ElasticSpec{.min_nodes = 2}));
}

TEST(ParseJobSpec, ElasticGangs) {
  auto spec = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nnum_nodes: 4\nelastic: {min_nodes: 2}\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->elastic, (ElasticSpec{.min_nodes = 2}));
  spec = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\nnum_nodes: 4\nrun: x\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->elastic.has_value());
  for (const auto& [yaml, message] : std::vector<std::pair<std::string, std::string>>{
           {"num_nodes: 4\nelastic: 2", "elastic: must be a mapping: elastic: {min_nodes: N}"},
           {"num_nodes: 4\nelastic: {}", "elastic.min_nodes: is required"},
           {"num_nodes: 4\nelastic: {min: 2}", "elastic.min: unknown field; allowed here: min_nodes"},
           {"num_nodes: 4\nelastic: {min_nodes: 0}", "elastic.min_nodes"},
           {"num_nodes: 4\nelastic: {min_nodes: 5}", "elastic.min_nodes: must be at most num_nodes (4)"},
           {"elastic: {min_nodes: 1}", "elastic: needs num_nodes >= 2: a one-node job has no survivors to keep"}}) {
    auto bad = ParseJobSpec("name: t\nresources: {accelerators: T4:1}\n" + yaml + "\nrun: x\n");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_TRUE(absl::StartsWith(bad.status().message(), message)) << yaml << " -> " << bad.status();
  }
}

TEST(ParseJobSpec, ImageIsKeptInCanonicalForm) {
  auto spec = ParseJobSpec("name: c\nimage: busybox\nresources: {accelerators: T4:1}\nrun: 'true'\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image, "localhost/busybox:latest");
  spec = ParseJobSpec("name: c\nimage: localhost/pytorch:bookworm\nresources: {accelerators: T4:1}\nrun: 'true'\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image, "localhost/pytorch:bookworm");
  EXPECT_EQ(ParseJobSpec("name: c\nresources: {accelerators: T4:1}\nrun: 'true'\n")->image, "");
}

TEST(ParseJobSpec, BadImageNamesTheField) {
  auto spec = ParseJobSpec("name: c\nimage: 'busybox; reboot'\nrun: 'true'\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "image: 'busybox; reboot' is not an image reference: only letters, digits, '.', '_', '-', '/' and ':' "
            "may appear; write NAME[:TAG] with lower-case path components, e.g. localhost/pytorch:bookworm or "
            "busybox (podman images lists a node's images)");
  spec = ParseJobSpec("name: c\nimage: [a]\nrun: 'true'\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), "image: ")) << spec.status();
}

TEST(ParseJobSpec, EngineNamesAFormatAndRoundTrips) {
  const std::string head = "name: serve\nresources: {accelerators: T4:1}\nrun: x\n";
  auto spec = ParseJobSpec(head + "engine: onnx-int8\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine, "onnx-int8");
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << JobSpecToYaml(*spec);
  EXPECT_EQ(again->engine, "onnx-int8");
  EXPECT_EQ(ParseJobSpec(head)->engine, "");
  EXPECT_EQ(ParseJobSpec(head + "engine: trt\n").status().message(),
            "engine: unknown engine format 'trt'; one of torchscript, onnx, onnx-int8, tensorrt");
  EXPECT_TRUE(absl::StartsWith(ParseJobSpec(head + "engine: [onnx]\n").status().message(), "engine: "));
}

TEST(ParseJobSpec, DatasetNamesAVersionAndRoundTrips) {
  const std::string head = "name: w\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n";
  auto spec = ParseJobSpec(head + "dataset: corpus\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset, "corpus");
  EXPECT_EQ(spec->dataset_rev, "main");  // the default branch
  spec = ParseJobSpec(head + "dataset: corpus.v1@cleaned~2\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->dataset, "corpus.v1");
  EXPECT_EQ(spec->dataset_rev, "cleaned~2");
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->dataset, "corpus.v1");
  EXPECT_EQ(again->dataset_rev, "cleaned~2");
  EXPECT_EQ(ErrorOf(head + "dataset: ../x@main\n"),
            "dataset: '../x@main': the dataset name must be 1-64 of A-Z a-z 0-9 . _ - (not starting with '.' or "
            "'-'), as in dataset: corpus@main");
  EXPECT_EQ(ErrorOf(head + "dataset: 'x@a b'\n"),
            "dataset: 'x@a b': after '@' comes a branch, tag or commit digest (optionally ~N), as in dataset: "
            "corpus@v2");
  EXPECT_EQ(ErrorOf(head + "dataset: x@\n").substr(0, 13), "dataset: 'x@'");
  EXPECT_EQ(ErrorOf(head + "dataset: [x]\n").substr(0, 8), "dataset:");
}

TEST(ParseJobSpec, WeightsNameARegistryModelOfThisOrAnotherTenantAndRoundTrip) {
  const std::string head = "name: w\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n";
  auto spec = ParseJobSpec(head + "weights: tiny\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights_owner, "");  // the job's tenant
  EXPECT_EQ(spec->weights, "tiny");
  EXPECT_EQ(spec->weights_rev, "main");
  spec = ParseJobSpec(head + "weights: team-a/llama.ft@v1~1\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights_owner, "team-a");
  EXPECT_EQ(spec->weights, "llama.ft");
  EXPECT_EQ(spec->weights_rev, "v1~1");
  auto again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->weights_owner, "team-a");
  EXPECT_EQ(again->weights, "llama.ft");
  EXPECT_EQ(again->weights_rev, "v1~1");
  EXPECT_EQ(ErrorOf(head + "weights: ../x@main\n"),
            "weights: '../x@main': before '/' comes the tenant that owns the model, as in weights: "
            "team-a/llama-ft@v1");
  EXPECT_EQ(ErrorOf(head + "weights: a/b/c\n"),
            "weights: 'b/c': the model name must be 1-64 of A-Z a-z 0-9 . _ - (not starting with '.' or '-'), as "
            "in weights: team-a/llama-ft@v1");
  EXPECT_EQ(ErrorOf(head + "weights: 'a/x@b c'\n").substr(0, 27), "weights: 'x@b c': after '@'");
  // The signer's key: a path on the submitting machine, or the PEM the CLI sends, kept byte for byte.
  EXPECT_EQ(ErrorOf(head + "weights_signer: k.pub.pem\n"),
            "weights_signer: verifies the model `weights:` names; add weights: or leave it out");
  EXPECT_EQ(ErrorOf(head + "weights: tiny\nweights_signer_pem: not a key\n"),
            "weights_signer_pem: must be a public key in PEM (-----BEGIN PUBLIC KEY-----), at most 16384 bytes");
  const std::string pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA0000\n-----END PUBLIC KEY-----\n";
  spec = ParseJobSpec(head + "weights: tiny\nweights_signer: keys/k.pub.pem\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights_signer, "keys/k.pub.pem");
  spec->weights_signer.clear();
  spec->weights_signer_pem = pem;
  again = ParseJobSpec(JobSpecToYaml(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->weights_signer_pem, pem);
}

}  // namespace
}  // namespace gpugeek::api

namespace gpugeek::api {
namespace {

TEST(ParseJobSpec, ThePytorchContainerExampleParses) {
  std::ifstream in(std::string(GPUGEEK_SOURCE_DIR) + "/examples/pytorch-in-a-container.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto spec = ParseJobSpec(text.str());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->image, "localhost/pytorch:bookworm");
  EXPECT_EQ(spec->env.at("OMP_NUM_THREADS"), "2");
}

}  // namespace
}  // namespace gpugeek::api
