#include "crypto/aead.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/ascii.h"

namespace gpugeek::crypto {
namespace {

std::string Hex(std::string_view hex) { return HexDecode(hex).value(); }

// Test Case 16 of McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)" (AES-256, 96-bit IV, 20-byte
// AAD), the vectors NIST's GCM validation uses; checked against Python's `cryptography` AESGCM too.
TEST(Gcm, MatchesThePublishedTestVector) {
  const SecretKey key = SecretKey::FromHex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308").value();
  const std::string plaintext =
      Hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0d"
          "e657ba637b39");
  const std::string aad = Hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
  const std::string nonce = Hex("cafebabefacedbaddecaf888");
  auto sealed = GcmSeal(key, nonce, plaintext, aad);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(HexEncode(*sealed),
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e639"
            "3ba7a0abcc9f662"
            "76fc6ece0f4e1768cddf8853bb2d551b");
  auto opened = GcmOpen(key, nonce, *sealed, aad);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, plaintext);
}

TEST(Gcm, AnyChangedByteKeyOrAadFailsAuthentication) {
  const SecretKey key = SecretKey::Generate().value();
  const std::string nonce = RandomBytes(kNonceBytes).value();
  const std::string sealed = GcmSeal(key, nonce, "attack at dawn", "ctx").value();
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] ^= 0x01;
    EXPECT_EQ(GcmOpen(key, nonce, altered, "ctx").status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  EXPECT_EQ(GcmOpen(SecretKey::Generate().value(), nonce, sealed, "ctx").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(GcmOpen(key, nonce, sealed, "ctx2").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(GcmOpen(key, nonce, sealed.substr(0, 5), "ctx").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GcmOpen(key, "short", sealed, "ctx").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Gcm, EmptyAndLargePlaintextsRoundTrip) {
  const SecretKey key = SecretKey::Generate().value();
  const std::string nonce = RandomBytes(kNonceBytes).value();
  for (size_t size : {size_t{0}, size_t{1}, size_t{4 << 20}}) {
    const std::string plaintext(size, 'x');
    const std::string sealed = GcmSeal(key, nonce, plaintext, "").value();
    EXPECT_EQ(sealed.size(), size + kTagBytes);
    EXPECT_EQ(GcmOpen(key, nonce, sealed, "").value(), plaintext);
  }
}

TEST(SecretKey, HexParsingRefusesWithoutEchoingKeyMaterial) {
  const SecretKey key = SecretKey::Generate().value();
  EXPECT_EQ(SecretKey::FromHex(key.ToHex()).value(), key);
  EXPECT_EQ(SecretKey::FromHex(absl::AsciiStrToUpper(key.ToHex())).value(), key);
  const std::string bad = std::string(63, 'a') + "z";
  auto parsed = SecretKey::FromHex(bad);
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(parsed.status().message()).find("aaaa"), std::string::npos) << parsed.status();
  EXPECT_EQ(SecretKey::FromHex("abcd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SecretKey::FromBytes("short").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SecretKey::Generate().value() == SecretKey::Generate().value());
}

TEST(Hex, RoundTripsAndRefusesBadDigits) {
  const std::string bytes("\x00\x7f\x80\xff", 4);
  EXPECT_EQ(HexEncode(bytes), "007f80ff");
  EXPECT_EQ(HexDecode("007F80ff").value(), bytes);
  EXPECT_EQ(HexDecode("abc").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HexDecode("zz").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpugeek::crypto
