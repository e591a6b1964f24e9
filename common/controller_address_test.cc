#include "common/controller_address.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace trellis {
namespace {

TEST(ControllerAddress, RoundTripsEveryField) {
  ControllerAddress a{"login2:50151", "login2", 4242, "1.2.3", 1700000000, "/out/ca.pem", "ab12"};
  auto back = ParseControllerAddress(FormatControllerAddress(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, "login2:50151");
  EXPECT_EQ(back->host, "login2");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->version, "1.2.3");
  EXPECT_EQ(back->started_unix, 1700000000);
  EXPECT_EQ(back->tls_ca, "/out/ca.pem");
  EXPECT_EQ(back->tls_ca_sha256, "ab12");
}

TEST(ControllerAddress, RefusesWhatNamesNoAddress) {
  EXPECT_FALSE(ParseControllerAddress("").ok());
  EXPECT_FALSE(ParseControllerAddress("[1,2]").ok());
  auto no_port = ParseControllerAddress(R"({"address": "login2"})");
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(no_port.status().message().find("\"address\" is 'login2'"), std::string::npos);
  EXPECT_FALSE(ParseControllerAddress(R"({"address": "login2:0"})").ok());
}

TEST(ControllerAddress, FileIsWrittenAndReadBackAndAMissingOneIsNotFound) {
  char tmpl[] = "/tmp/controller-address-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string path = ControllerAddressPath(tmpl);
  EXPECT_EQ(ReadControllerAddress(path).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteControllerAddress(path, {"127.0.0.1:7000", "h", 1, "v", 2, "", ""}).ok());
  auto back = ReadControllerAddress(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->address, "127.0.0.1:7000");
  std::ofstream(path) << "{\"address\": 7}";
  auto bad = ReadControllerAddress(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
  std::remove(path.c_str());
  rmdir(tmpl);
}

}  // namespace
}  // namespace trellis
