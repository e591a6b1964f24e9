// Real handshakes on loopback with pairs made by deploy/tls/make-self-signed.sh.
#include "common/tls.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/subprocess.h"

namespace trellis::tls {
namespace {

namespace fs = std::filesystem;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("trellis-tls-test-" + std::to_string(getpid())));
    for (const char* pair : {"a", "b"}) {
      auto made = RunCommand({"bash", TRELLIS_SOURCE_DIR "/deploy/tls/make-self-signed.sh",
                              (*dir_ / pair).string()});
      ASSERT_TRUE(made.ok());
      ASSERT_EQ(made->exit_code, 0) << made->err;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Cert(const char* pair) { return (*dir_ / pair / "controller.crt").string(); }
  static std::string Key(const char* pair) { return (*dir_ / pair / "controller.key").string(); }

  // Serves pair `pair` on loopback; returns the port.
  int Serve(const char* pair) {
    auto creds = ServerCredentials({Cert(pair), Key(pair)});
    EXPECT_TRUE(creds.ok()) << creds.status();
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port);
    builder.RegisterCallbackGenericService(&service_);  // a server needs one service
    server_ = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    return port;
  }
  // A refused handshake is retried until the deadline: a second tells.
  bool Connects(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto channel = grpc::CreateChannel(target, creds);
    return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  static fs::path* dir_;
  grpc::CallbackGenericService service_;
  std::unique_ptr<grpc::Server> server_;
};
fs::path* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, TheScriptsKeyIsPrivateAndItsCertificateNamesLoopback) {
  struct stat st {};
  ASSERT_EQ(stat(Key("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto text = RunCommand({"openssl", "x509", "-in", Cert("a"), "-noout", "-text"});
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->out.find("IP Address:127.0.0.1"), std::string::npos) << text->out;
  EXPECT_NE(text->out.find("DNS:localhost"), std::string::npos);
}

TEST_F(TlsTest, AClientWithTheCaConnects) {
  const int port = Serve("a");
  auto creds = ChannelCredentials("--tls-ca", Cert("a"));
  ASSERT_TRUE(creds.ok());
  EXPECT_TRUE(Connects("127.0.0.1:" + std::to_string(port), *creds));
  EXPECT_TRUE(Connects("localhost:" + std::to_string(port), *creds));
}

TEST_F(TlsTest, AClientWithAnotherCaOrNoneIsRefused) {
  const int port = Serve("a");
  const std::string target = "127.0.0.1:" + std::to_string(port);
  auto other = ChannelCredentials("--tls-ca", Cert("b"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(Connects(target, *other));
  // Plain TCP to a TLS port: the handshake never completes.
  auto plain = ChannelCredentials("--tls-ca", "");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(Connects(target, *plain));
}

TEST_F(TlsTest, ANameTheCertificateLacksIsRefused) {
  const int port = Serve("a");
  auto creds = ChannelCredentials("--tls-ca", Cert("a"));
  ASSERT_TRUE(creds.ok());
  // 127.0.0.2 is loopback too, but not in the certificate.
  EXPECT_FALSE(Connects("127.0.0.2:" + std::to_string(port), *creds));
}

TEST_F(TlsTest, BadFilesAreNamedWithWhatIsAccepted) {
  auto missing = ChannelCredentials("--tls-ca", (*dir_ / "nope.pem").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-ca"), std::string::npos);
  EXPECT_NE(missing.status().message().find("nope.pem"), std::string::npos);

  const std::string junk = (*dir_ / "junk.pem").string();
  std::ofstream(junk) << "not a certificate\n";
  auto not_pem = ChannelCredentials("--tls-ca", junk);
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("no PEM CERTIFICATE"), std::string::npos)
      << not_pem.status();
  // A key given as the certificate, and a certificate as the key.
  EXPECT_FALSE(ServerCredentials({Key("a"), Key("a")}).ok());
  auto cert_as_key = ServerCredentials({Cert("a"), Cert("a")});
  ASSERT_FALSE(cert_as_key.ok());
  EXPECT_NE(cert_as_key.status().message().find("--tls-key"), std::string::npos);
}

TEST_F(TlsTest, AKeyOthersCanReadIsRefused) {
  const std::string key = (*dir_ / "open.key").string();
  fs::copy_file(Key("a"), key, fs::copy_options::overwrite_existing);
  chmod(key.c_str(), 0644);
  auto creds = ServerCredentials({Cert("a"), key});
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("chmod 600"), std::string::npos) << creds.status();
}

}  // namespace
}  // namespace trellis::tls
