// Throughput of sealing and opening under a Keyring (AES-256-GCM via OpenSSL EVP), per record size, and
// the cost of the per-record framing of sealed logs. Run by hand:
//   ninja -C build crypto_bench && build/src/crypto/crypto_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "crypto/sealed_file.h"
#include "crypto/test_util.h"

namespace gpugeek::crypto {
namespace {

struct Fixture {
  Fixture() {
    if (!CreateMasterKeyFile(dir.Path("master.key")).ok()) std::abort();
    provider = FileKeyProvider::Open(dir.Path("master.key")).value();
    keyring = Keyring::Open(dir.Path("keyring.json"), *provider).value();
  }
  testing::TempDir dir;
  std::unique_ptr<FileKeyProvider> provider;
  std::unique_ptr<Keyring> keyring;
};

Fixture& Shared() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

void BM_Seal(benchmark::State& state) {
  const std::string plaintext(static_cast<size_t>(state.range(0)), 'x');
  Keyring& keyring = *Shared().keyring;
  for (auto _ : state) benchmark::DoNotOptimize(keyring.Seal("acme", plaintext, "bench").value());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Seal)->Arg(64)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);

void BM_Open(benchmark::State& state) {
  Keyring& keyring = *Shared().keyring;
  const std::string blob = keyring.Seal("acme", std::string(static_cast<size_t>(state.range(0)), 'x'), "bench").value();
  for (auto _ : state) benchmark::DoNotOptimize(keyring.Open("acme", blob, "bench").value());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Open)->Arg(64)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20);

// Appending sealed log records to a file (page cache; no fsync).
void BM_LogAppend(benchmark::State& state) {
  Fixture& f = Shared();
  auto writer = SealedLogWriter::Open(*f.keyring, "acme", f.dir.Path("bench.log"), "log:bench").value();
  const std::string line(static_cast<size_t>(state.range(0)), 'l');
  for (auto _ : state) benchmark::DoNotOptimize(writer->Append(line).value());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LogAppend)->Arg(4 << 10)->Arg(64 << 10);

}  // namespace
}  // namespace gpugeek::crypto

BENCHMARK_MAIN();
