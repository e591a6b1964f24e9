// The built `trellis report` against a controller over real gRPC: the file it
// writes, and its exit codes (cli/exit_status.h).

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sqlite.h"
#include "common/subprocess.h"
#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

class ReportCliTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    if (HasFatalFailure()) return;
    // A second server over the same controller, on a port the test knows.
    service_ = std::make_unique<ControllerServiceImpl>(
        controller_.get(), Authenticator("tester", kTestToken, "/nonexistent/token"));
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    cli_server_ = b.BuildAndStart();
    ASSERT_NE(cli_server_, nullptr);
  }
  void TearDown() override {
    if (cli_server_) cli_server_->Shutdown(std::chrono::system_clock::now());
    ControllerTest::TearDown();
  }

  CommandResult Trellis(std::vector<std::string> args) {
    args.insert(args.begin(), {TRELLIS_CLI_PATH, "--addr", "127.0.0.1:" + std::to_string(port_)});
    CommandOptions options;
    options.timeout = std::chrono::seconds(30);
    options.extra_env["TRELLIS_TOKEN"] = kTestToken;  // over TCP, as a team member would
    auto result = RunCommand(args, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{-1, "", "", false};
  }

  std::string NewRunWithSteps(int steps) {
    v1::SubmitRunResponse resp;
    EXPECT_TRUE(Submit(kSpec, &resp).ok());
    auto db = sqlite::Db::Open((dir_ / "t.db").string());
    EXPECT_TRUE(db.ok());
    for (int s = 1; s <= steps; ++s) {
      auto st = (*db)->Prepare(
          "INSERT INTO steps (run_id, attempt, launch, step, ranks, loss_sum, tokens, "
          "step_seconds_max, last_json, updated_ms) VALUES (?, 1, 1, ?, 4, ?, 4096, 0.5, "
          "'{\"v\":1,\"step\":1,\"loss\":2,\"tokens\":4096,\"step_seconds\":0.5,"
          "\"fwd_seconds\":0.1}', ?)");
      EXPECT_TRUE(st.ok());
      EXPECT_TRUE(st->Bind(1, resp.run_id())
                      .Bind(2, s)
                      .Bind(3, 20.0 - s)
                      .Bind(4, int64_t{1700000000000} + s)
                      .Run()
                      .ok());
    }
    return resp.run_id();
  }

  static std::string Read(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  int port_ = 0;
  std::unique_ptr<ControllerServiceImpl> service_;
  std::unique_ptr<grpc::Server> cli_server_;
};

TEST_F(ReportCliTest, WritesTheFileAtomically) {
  std::string id = NewRunWithSteps(12);
  std::filesystem::path out = dir_ / "pages" / "run.html";
  std::filesystem::create_directories(out.parent_path());
  CommandResult r = Trellis({"report", id, "--html", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + out.string() + "\n");
  std::string html = Read(out);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<code>" + id + "</code>"), std::string::npos);
  EXPECT_NE(html.find("data-points=\"12\""), std::string::npos);
  // Only the page is left: the temporary file was renamed over it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out.parent_path()))
    files += !e.is_directory();
  EXPECT_EQ(files, 1);

  // Again over the existing page: replaced whole.
  ASSERT_EQ(Trellis({"report", id, "--html", out.string()}).exit_code, 0);
  EXPECT_EQ(Read(out).rfind("<!DOCTYPE html>", 0), 0u);
}

TEST_F(ReportCliTest, StandardOutput) {
  std::string id = NewRunWithSteps(0);
  CommandResult r = Trellis({"report", id, "--html", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(r.out.find("no steps recorded"), std::string::npos);
}

TEST_F(ReportCliTest, UnknownRunExits3AndNamesIt) {
  std::filesystem::path out = dir_ / "nope.html";
  CommandResult r = Trellis({"report", "nope-9", "--html", out.string()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("nope-9"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(ReportCliTest, MissingDirectoryExits2BeforeAskingTheController) {
  // Port 1: nothing listens there; the check comes first.
  CommandResult r = RunCommand({TRELLIS_CLI_PATH, "--addr", "127.0.0.1:1", "report", "x-1",
                                "--html", "/nonexistent-dir/sub/out.html"},
                               CommandOptions{})
                        .value_or(CommandResult{-1, "", "", false});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "trellis: --html: the directory '/nonexistent-dir/sub' does not exist\n");
}

TEST_F(ReportCliTest, UnreachableControllerExits5) {
  CommandResult r = RunCommand({TRELLIS_CLI_PATH, "--addr", "127.0.0.1:1", "report", "x-1",
                                "--html", (dir_ / "x.html").string()},
                               CommandOptions{})
                        .value_or(CommandResult{-1, "", "", false});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("cannot reach the controller at 127.0.0.1:1"), std::string::npos) << r.err;
}

TEST_F(ReportCliTest, HtmlIsRequired) {
  CommandResult r =
      RunCommand({TRELLIS_CLI_PATH, "--addr", "127.0.0.1:1", "report", "x-1"}, CommandOptions{})
          .value_or(CommandResult{-1, "", "", false});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace trellis::controller
