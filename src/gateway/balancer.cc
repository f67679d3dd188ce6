#include "gateway/balancer.h"

#include <algorithm>
#include <map>

namespace gpugeek::gateway {

uint64_t StickyHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV prime
  }
  // splitmix64 finaliser (Steele, Lea, Flood 2014), so nearby keys spread over the buckets.
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

Balancer::Balancer(uint64_t seed, OutlierPolicy policy) : policy_(policy), rng_state_(seed | 1) {}

uint64_t Balancer::Next() {  // xorshift64*
  rng_state_ ^= rng_state_ >> 12;
  rng_state_ ^= rng_state_ << 25;
  rng_state_ ^= rng_state_ >> 27;
  return rng_state_ * 0x2545F4914F6CDD1DULL;
}

void Balancer::Update(std::vector<VersionEndpoints> versions, StickyPolicy sticky) {
  std::map<std::string, std::unique_ptr<ReplicaState>> old;
  for (auto& r : live_) old[r->endpoint.id] = std::move(r);
  live_.clear();
  replica_states_.assign(versions.size(), {});
  for (size_t v = 0; v < versions.size(); ++v) {
    for (const ReplicaEndpoint& e : versions[v].replicas) {
      std::unique_ptr<ReplicaState> state;
      if (auto it = old.find(e.id); it != old.end() && it->second) {
        state = std::move(it->second);
      } else {
        state = std::make_unique<ReplicaState>();
      }
      state->endpoint = e;
      replica_states_[v].push_back(state.get());
      live_.push_back(std::move(state));
    }
  }
  for (auto& [id, state] : old) {
    if (state && state->outstanding > 0) {
      state->retired = true;
      retired_.push_back(std::move(state));
    }
  }
  std::erase_if(retired_, [](const auto& r) { return r->outstanding == 0; });
  if (versions.size() != versions_.size()) current_weight_.assign(versions.size(), 0);
  versions_ = std::move(versions);
  sticky_ = std::move(sticky);
}

int Balancer::VersionIndex(std::string_view name) const {
  for (size_t v = 0; v < versions_.size(); ++v) {
    if (versions_[v].name == name) return static_cast<int>(v);
  }
  return -1;
}

int Balancer::RoundRobin() {
  // Smooth weighted round robin: every version gains its weight, the largest current weight wins and pays the total.
  int64_t total = 0;
  int best = -1;
  for (size_t v = 0; v < versions_.size(); ++v) {
    const int64_t w = versions_[v].weight_percent;
    if (w <= 0) continue;
    current_weight_[v] += w;
    total += w;
    if (best < 0 || current_weight_[v] > current_weight_[best]) best = static_cast<int>(v);
  }
  if (best >= 0) current_weight_[best] -= total;
  return best;
}

std::optional<Balancer::VersionChoice> Balancer::PickVersion(std::optional<std::string_view> sticky_value) {
  if (sticky_value && sticky_.kind == StickyKind::kCookie) {
    const int v = VersionIndex(*sticky_value);
    if (v >= 0 && versions_[v].weight_percent > 0) return VersionChoice{.version = v, .set_cookie = false};
  } else if (sticky_value && sticky_.kind == StickyKind::kHeader) {
    int64_t total = 0;
    for (const VersionEndpoints& ve : versions_) total += std::max(0, ve.weight_percent);
    if (total > 0) {
      int64_t bucket = static_cast<int64_t>(StickyHash(*sticky_value) % static_cast<uint64_t>(total));
      for (size_t v = 0; v < versions_.size(); ++v) {
        const int64_t w = std::max(0, versions_[v].weight_percent);
        if (bucket < w) return VersionChoice{.version = static_cast<int>(v), .set_cookie = false};
        bucket -= w;
      }
    }
  }
  const int v = RoundRobin();
  if (v < 0) return std::nullopt;
  return VersionChoice{.version = v, .set_cookie = sticky_.kind == StickyKind::kCookie};
}

bool Balancer::Ejected(const ReplicaState& r, MonoTime now) const { return r.ejected_until && now < *r.ejected_until; }

ReplicaState* Balancer::PickReplica(int version, MonoTime now, const std::vector<const ReplicaState*>& exclude) {
  if (version < 0 || static_cast<size_t>(version) >= replica_states_.size()) return nullptr;
  const auto excluded = [&](const ReplicaState* r) {
    return std::find(exclude.begin(), exclude.end(), r) != exclude.end();
  };
  // Candidates: not excluded and not ejected; when that leaves none, not excluded (panic routing).
  ReplicaState* candidates[2] = {nullptr, nullptr};
  for (int pass = 0; pass < 2 && !candidates[0]; ++pass) {
    const auto& all = replica_states_[version];
    size_t n = 0;
    for (ReplicaState* r : all) {
      if (excluded(r) || (pass == 0 && Ejected(*r, now))) continue;
      ++n;
    }
    if (n == 0) continue;
    // Two distinct draws among the n eligible replicas.
    const size_t a = Next() % n;
    size_t b = n > 1 ? Next() % (n - 1) : a;
    if (n > 1 && b >= a) ++b;
    size_t i = 0;
    for (ReplicaState* r : all) {
      if (excluded(r) || (pass == 0 && Ejected(*r, now))) continue;
      if (i == a) candidates[0] = r;
      if (i == b) candidates[1] = r;
      ++i;
    }
  }
  ReplicaState* x = candidates[0];
  ReplicaState* y = candidates[1];
  if (!x) return nullptr;
  if (!y || x == y) return x;
  // Lower (outstanding + 1) / capacity wins, compared cross-multiplied (exact in long double's 64-bit mantissa for
  // the counts and capacities that occur).
  const long double lx = static_cast<long double>(x->outstanding + 1) * y->endpoint.capacity_milli;
  const long double ly = static_cast<long double>(y->outstanding + 1) * x->endpoint.capacity_milli;
  return ly < lx ? y : x;
}

void Balancer::Finish(ReplicaState* r, Outcome outcome, MonoTime now) {
  if (r->outstanding > 0) --r->outstanding;
  ++r->requests;
  if (r->retired) {
    if (r->outstanding == 0) std::erase_if(retired_, [r](const auto& p) { return p.get() == r; });
    return;
  }
  if (outcome == Outcome::kServerError || outcome == Outcome::kConnectFailure) {
    if (++r->consecutive_failures < policy_.consecutive_failures || Ejected(*r, now)) return;
    // Find its version and how many of it are out already.
    for (const auto& states : replica_states_) {
      if (std::find(states.begin(), states.end(), r) == states.end()) continue;
      int64_t out = 0;
      for (const ReplicaState* s : states) out += Ejected(*s, now) ? 1 : 0;
      const int64_t allowed =
          std::max<int64_t>(1, static_cast<int64_t>(states.size()) * policy_.max_ejection_percent / 100);
      if (out >= allowed) return;
      ++r->times_ejected;
      ++ejections_;
      r->ejected_until = now + std::min(policy_.max_ejection, policy_.base_ejection * r->times_ejected);
      r->consecutive_failures = 0;
      return;
    }
  } else if (outcome == Outcome::kSuccess) {
    r->consecutive_failures = 0;
  }
}

}  // namespace gpugeek::gateway
