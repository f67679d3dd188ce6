#pragma once
// ControlPlaneFixture: a real ControlPlane over a real SqliteStore in a temporary directory, driven
// by a FakeClock, for the control plane's unit tests (control_plane_test.cc, fencing_test.cc). The
// test plays the agents: it registers nodes, heartbeats for them and reports their workloads, and
// runs the controllers' passes (Reconcile) itself.
//
// Heartbeat() is only the liveness path (lease, log bytes, queued reports; the reply from the last
// snapshot); Beat() adds the controller pass that applies the reports, as the server's loop does
// when reports arrive.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/fake_clock.h"
#include "controlplane/control_plane.h"
#include "controlplane/secrets.h"
#include "crypto/key_provider.h"
#include "crypto/keyring.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane::testing {

class ControlPlaneFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("gpugeek_cp_test_" + std::to_string(::getpid()) + "_" + test->test_suite_name() + "_" + test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    // Encryption at rest as the server has it: job specs in the store and job logs are sealed.
    const std::string key_file = (dir_ / "master.key").string();
    ASSERT_TRUE(crypto::CreateMasterKeyFile(key_file).ok());
    key_provider_ = crypto::FileKeyProvider::Open(key_file).value();
    keyring_ = crypto::Keyring::Open((dir_ / "keyring.json").string(), *key_provider_).value();
    sealer_ = std::make_unique<KeyringSealer>(*keyring_);
    Restart();
  }
  void TearDown() override {
    cp_.reset();
    store_.reset();
    sealer_.reset();
    keyring_.reset();
    std::filesystem::remove_all(dir_);
  }
  // What Restart gives ControlPlane::Create besides the store, clock and data dir.
  virtual ControlPlaneOptions Options() const { return {}; }
  // The store the control plane is given over the real one (a test may wrap it to inject faults).
  virtual store::Store& StoreFor(store::SqliteStore& sqlite) { return sqlite; }
  // A fresh control plane over the same store and data dir: what a server restart does.
  void Restart() {
    cp_.reset();
    store_.reset();
    auto store =
        store::SqliteStore::Open({.path = (dir_ / "gpugeek.db").string(), .clock = &clock_, .sealer = sealer_.get()});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ControlPlaneOptions options = Options();
    options.store = &StoreFor(*store_);
    options.clock = &clock_;
    options.data_dir = (dir_ / "data").string();
    options.keyring = keyring_.get();
    auto cp = ControlPlane::Create(options);
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = std::move(*cp);
  }
  // The registration Register sends: an emulated node (hw/emulate_spec.h) of 64 cores and 512 GiB at
  // 10.0.0.N (N from the last letter of the name), its agent process `instance`.
  static api::Registration Registration(const std::string& node, const std::string& spec,
                                        const std::string& capacity = "on-demand", const std::string& region = "",
                                        const std::string& instance = "") {
    auto parsed = hw::ParseEmulateSpec(spec);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    api::Registration r;
    r.node = node;
    r.address = "10.0.0." + std::to_string(node.back() - 'a' + 1);
    r.capacity_type = capacity;
    r.region = region;
    r.instance_id = instance;
    if (parsed.ok())
      r.inventory = hw::BuildEmulatedInventory(*parsed, node, {node, 64, uint64_t{512} << 30, 2, "test"});
    return r;
  }
  void Register(const std::string& node, const std::string& spec, const std::string& capacity = "on-demand",
                const std::string& region = "", const std::string& instance = "") {
    auto reply = cp_->Register(Registration(node, spec, capacity, region, instance));
    ASSERT_TRUE(reply.ok()) << reply.status();
  }
  std::string Submit(const std::string& yaml, const std::string& config = "") {
    auto job = cp_->Submit({.spec_yaml = yaml, .model_config_json = config, .tenant = "team-a"});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->record.id : "";
  }
  // One heartbeat of `node`'s agent (process `instance`), without a controller pass: it renews the
  // lease, stores the log bytes and queues the reports. The reply is from the last snapshot.
  api::HeartbeatReply Heartbeat(const std::string& node, std::vector<api::WorkloadReport> reports = {},
                                std::vector<api::LogChunk> logs = {}, const std::string& instance = "") {
    api::Heartbeat hb;
    hb.node = node;
    hb.instance_id = instance;
    hb.workloads = std::move(reports);
    hb.logs = std::move(logs);
    auto reply = cp_->Heartbeat(hb);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : api::HeartbeatReply{};
  }
  // A heartbeat, then one controller pass: the reports have taken effect when it returns. The reply
  // is the heartbeat's (from the snapshot before the pass).
  api::HeartbeatReply Beat(const std::string& node, std::vector<api::WorkloadReport> reports = {},
                           std::vector<api::LogChunk> logs = {}, const std::string& instance = "") {
    api::HeartbeatReply reply = Heartbeat(node, std::move(reports), std::move(logs), instance);
    cp_->Reconcile();
    return reply;
  }
  // What `node`'s agent is told to hold now (the latest snapshot).
  std::vector<api::Assignment> Assignments(const std::string& node) {
    std::shared_ptr<const Snapshot> snap = cp_->snapshot();
    auto it = snap->assignments.find(node);
    return it == snap->assignments.end() ? std::vector<api::Assignment>{} : it->second;
  }
  // The whole log of member (job, rank, epoch).
  std::string Log(const std::string& id, int rank, int64_t epoch) {
    auto job = cp_->GetJob(id);
    auto range = cp_->logs().Read(job.ok() ? job->record.tenant : "", id, rank, epoch, 0, kMaxLogReadBytes);
    EXPECT_TRUE(range.ok()) << range.status();
    return range.ok() ? range->data : "";
  }
  api::JobState State(const std::string& id) { return cp_->GetJob(id)->record.state; }
  std::string NodeState(const std::string& node) { return cp_->Node(node)->state; }

  FakeClock clock_{TimePoint(std::chrono::seconds(1'800'000'000))};
  std::filesystem::path dir_;
  std::unique_ptr<crypto::FileKeyProvider> key_provider_;
  std::unique_ptr<crypto::Keyring> keyring_;
  std::unique_ptr<KeyringSealer> sealer_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<ControlPlane> cp_;
};

}  // namespace gpugeek::controlplane::testing
