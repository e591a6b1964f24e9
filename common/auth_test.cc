#include "common/auth.h"

#include <gtest/gtest.h>

namespace trellis::auth {
namespace {

const std::string kAlice(32, 'a');
const std::string kBob(40, 'b');

TEST(TokensFileTest, ReadsMembersSkippingCommentsAndBlankLines) {
  auto team = ParseTokensFile("# team tokens\n\n" + kAlice + " alice admin\n  " + kBob +
                              "\tbob user   # the new one\n");
  ASSERT_TRUE(team.ok()) << team.status();
  ASSERT_EQ(team->size(), 2u);
  EXPECT_EQ((*team)[0].name, "alice");
  EXPECT_TRUE((*team)[0].admin);
  EXPECT_EQ((*team)[1].token, kBob);
  EXPECT_FALSE((*team)[1].admin);
}

TEST(TokensFileTest, ABadLineIsNamedWithWhatIsAccepted) {
  auto message = [](const std::string& text) {
    return std::string(ParseTokensFile(text).status().message());
  };
  EXPECT_EQ(message(kAlice + " alice\n"),
            "tokens file line 1: expected '<token> <name> <role>', got 2 fields");
  EXPECT_NE(message("short alice user\n").find("line 1: a token is 32 to 512 characters"),
            std::string::npos);
  EXPECT_NE(message(kAlice + " Alice user\n").find("name 'Alice'"), std::string::npos);
  EXPECT_EQ(message("\n" + kAlice + " alice root\n"),
            "tokens file line 2: role 'root': expected user or admin");
  EXPECT_EQ(message(kAlice + " alice user\n" + kAlice + " mallory admin\n"),
            "tokens file line 2: the same token as line 1");
}

TEST(AuthTest, LoopbackListenAddresses) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:50151"));
  EXPECT_TRUE(IsLoopbackListen("localhost:0"));
  EXPECT_TRUE(IsLoopbackListen("[::1]:50151"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:50151"));
  EXPECT_FALSE(IsLoopbackListen("[::]:50151"));
  EXPECT_FALSE(IsLoopbackListen("10.1.2.3:50151"));
}

TEST(AuthTest, TokensCompareWhole) {
  EXPECT_TRUE(TokensEqual(kAlice, kAlice));
  EXPECT_FALSE(TokensEqual(kAlice, kAlice.substr(1)));
  EXPECT_FALSE(TokensEqual(kAlice, kBob.substr(0, 32)));
}

}  // namespace
}  // namespace trellis::auth
