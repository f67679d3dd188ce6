#include "api/names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpugeek::api {
namespace {

constexpr const char* kNodeRule =
    "a node name is 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. gpu-node-01)";
constexpr const char* kJobRule =
    "a job name is 1-128 letters, digits, '.', '_' or '-', other than '.' and '..' (e.g. llama2-70b-lora)";
constexpr const char* kTenantRule =
    "a tenant is 1-63 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit "
    "(e.g. team-a)";
constexpr const char* kHostPortFix = "write host:port, e.g. 10.0.0.7:9400, [fd00::7]:9400 or gpu-node-01.lan:9400";

std::string NameError(std::string_view field, std::string_view value, NameKind kind) {
  absl::Status s = ValidateName(field, value, kind);
  if (s.ok()) return "(ok)";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

std::string HostPortError(std::string_view value) {
  absl::Status s = ValidateHostPort("metrics_address", value);
  if (s.ok()) return "(ok)";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST(ValidateName, AcceptsNodeNamesLikeHostnames) {
  for (const std::string& name :
       std::vector<std::string>{"gpu-node-01", "a", "Node_7.rack-2", "10.0.0.7", std::string(128, 'n')}) {
    EXPECT_TRUE(ValidateName("node", name, NameKind::kNode).ok()) << name;
  }
}

TEST(ValidateName, RefusesBadNodeNamesNamingTheProblem) {
  EXPECT_EQ(NameError("node", "evil/slash", NameKind::kNode),
            std::string("node: 'evil/slash' has '/' at offset 4; ") + kNodeRule);
  EXPECT_EQ(NameError("node", "", NameKind::kNode), std::string("node: is empty; ") + kNodeRule);
  EXPECT_EQ(NameError("node", "-n1", NameKind::kNode), std::string("node: '-n1' starts with '-'; ") + kNodeRule);
  EXPECT_EQ(NameError("node", ".hidden", NameKind::kNode),
            std::string("node: '.hidden' starts with '.'; ") + kNodeRule);
  EXPECT_EQ(NameError("registration.node", "n\x1b[2Jx", NameKind::kNode),
            std::string("registration.node: 'n\\x1b[2Jx' has '\\x1b' at offset 1; ") + kNodeRule);
  EXPECT_EQ(NameError("node", "caf\xc3\xa9", NameKind::kNode),
            std::string("node: 'caf\\xc3\\xa9' has '\\xc3' at offset 3; ") + kNodeRule);
  EXPECT_EQ(NameError("node", std::string(129, 'n'), NameKind::kNode),
            "node: '" + std::string(64, 'n') + "...' (129 bytes) is too long (129 characters); " + kNodeRule);
  EXPECT_EQ(NameError("node", std::string(1 << 20, 'n'), NameKind::kNode),
            "node: '" + std::string(64, 'n') + "...' (1048576 bytes) is too long (1048576 characters); " + kNodeRule);
}

TEST(ValidateName, JobNamesAllowAnyOrderOfTheCharacters) {
  for (const std::string& name :
       std::vector<std::string>{"llama2-70b-lora", "Run_3.v2", "-x", ".cache", "a..b", std::string(128, 'j')}) {
    EXPECT_TRUE(ValidateName("name", name, NameKind::kJob).ok()) << name;
  }
  EXPECT_EQ(NameError("name", "..", NameKind::kJob), std::string("name: '..' is reserved; ") + kJobRule);
  EXPECT_EQ(NameError("name", ".", NameKind::kJob), std::string("name: '.' is reserved; ") + kJobRule);
  EXPECT_EQ(NameError("name", "a b", NameKind::kJob), std::string("name: 'a b' has ' ' at offset 1; ") + kJobRule);
  EXPECT_EQ(NameError("name", std::string(129, 'j'), NameKind::kJob),
            "name: '" + std::string(64, 'j') + "...' (129 bytes) is too long (129 characters); " + kJobRule);
}

TEST(ValidateName, TenantsAreDnsLabels) {
  for (const std::string& name : std::vector<std::string>{"team-a", "t", "a1", std::string(63, 't')}) {
    EXPECT_TRUE(ValidateName("tenant", name, NameKind::kTenant).ok()) << name;
  }
  EXPECT_EQ(NameError("tenant", "Team-A", NameKind::kTenant),
            std::string("tenant: 'Team-A' has 'T' at offset 0; ") + kTenantRule);
  EXPECT_EQ(NameError("tenant", "1team", NameKind::kTenant),
            std::string("tenant: '1team' starts with '1'; ") + kTenantRule);
  EXPECT_EQ(NameError("tenant", "team-", NameKind::kTenant),
            std::string("tenant: 'team-' ends with '-'; ") + kTenantRule);
  EXPECT_EQ(NameError("tenant", "team_a", NameKind::kTenant),
            std::string("tenant: 'team_a' has '_' at offset 4; ") + kTenantRule);
  EXPECT_EQ(NameError("tenant", std::string(64, 't'), NameKind::kTenant),
            "tenant: '" + std::string(64, 't') + "' is too long (64 characters); " + kTenantRule);
}

TEST(ValidateHostPort, AcceptsAddressesAScraperCanDial) {
  for (const char* address :
       {"10.0.0.7:9400", "[fd00::7]:9400", "[::1]:1", "gpu-node-01.lan:65535", "localhost:9400", "a-b.c-d.e:80"}) {
    EXPECT_TRUE(ValidateHostPort("metrics_address", address).ok()) << address;
  }
}

TEST(ValidateHostPort, RefusesEverythingElseNamingTheProblem) {
  const std::string fix = std::string("; ") + kHostPortFix;
  EXPECT_EQ(HostPortError(""), "metrics_address: is empty" + fix);
  EXPECT_EQ(HostPortError("10.0.0.7"), "metrics_address: '10.0.0.7' has no port" + fix);
  EXPECT_EQ(HostPortError(":9400"), "metrics_address: ':9400' has no host" + fix);
  EXPECT_EQ(HostPortError("10.0.0.7:0"), "metrics_address: '10.0.0.7:0' has port '0', not a number 1-65535" + fix);
  EXPECT_EQ(HostPortError("10.0.0.7:65536"),
            "metrics_address: '10.0.0.7:65536' has port '65536', not a number 1-65535" + fix);
  EXPECT_EQ(HostPortError("10.0.0.7:+80"),
            "metrics_address: '10.0.0.7:+80' has port '+80', not a number 1-65535" + fix);
  EXPECT_EQ(HostPortError("10.0.0.7:"), "metrics_address: '10.0.0.7:' has port '', not a number 1-65535" + fix);
  EXPECT_EQ(HostPortError("999.0.0.7:80"),
            "metrics_address: '999.0.0.7:80' has '999.0.0.7', which is not an IPv4 address" + fix);
  EXPECT_EQ(HostPortError("fd00::7:9400"),
            "metrics_address: 'fd00::7:9400' has ':' in its host; put an IPv6 address in brackets" + fix);
  EXPECT_EQ(HostPortError("[fd00::7"), "metrics_address: '[fd00::7' opens '[' without closing it" + fix);
  EXPECT_EQ(HostPortError("[fd00::7]"), "metrics_address: '[fd00::7]' has no ':port' after the ']'" + fix);
  EXPECT_EQ(HostPortError("[10.0.0.7]:80"),
            "metrics_address: '[10.0.0.7]:80' has '10.0.0.7' in brackets, which is not an IPv6 address" + fix);
  EXPECT_EQ(HostPortError("evil/host:80"),
            "metrics_address: 'evil/host:80' has '/' in its host name; a host name is letters, digits, '-' and "
            "'.'" +
                fix);
  EXPECT_EQ(HostPortError("a..b:80"),
            "metrics_address: 'a..b:80' has an empty label in its host name (two dots, or a dot at an end)" + fix);
  EXPECT_EQ(HostPortError("-a.b:80"),
            "metrics_address: '-a.b:80' has a host name label '-a' starting or ending with '-'" + fix);
  EXPECT_EQ(HostPortError(std::string(64, 'h') + ".lan:80"),
            "metrics_address: '" + std::string(64, 'h') +
                "...' (71 bytes) has a host name label of 64 characters (at most 63)" + fix);
  EXPECT_EQ(HostPortError("h\n:80"),
            "metrics_address: 'h\\n:80' has '\\n' in its host name; a host name is "
            "letters, digits, '-' and '.'" +
                fix);
  EXPECT_EQ(HostPortError(std::string(1 << 20, 'h')),
            "metrics_address: '" + std::string(64, 'h') + "...' (1048576 bytes) is too long" + fix);
}

}  // namespace
}  // namespace gpugeek::api
