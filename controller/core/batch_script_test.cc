#include "controller/core/batch_script.h"

#include <gtest/gtest.h>

#include "common/subprocess.h"

namespace trellis::controller {
namespace {

AttemptPaths Paths() {
  return {"hello-1", 2, "/srv/trellis/out/hello-1", "/opt/trellis/bin/trellis-worker",
          "login1:50151", "/srv/trellis/out/hello-1/attempt-2/secret", "5eed5eed", ""};
}

TEST(BatchScriptTest, FillsEveryPlaceholderQuoted) {
  auto s = RenderBatchScript("R=@RUN_ID@ A=@ATTEMPT@ W=@WORKER@ C=@CONTROLLER@ D=@RUN_DIR@ "
                             "S=@SECRET_FILE@",
                             Paths());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s,
            "R='hello-1' A=2 W='/opt/trellis/bin/trellis-worker' C='login1:50151' "
            "D='/srv/trellis/out/hello-1' S='/srv/trellis/out/hello-1/attempt-2/secret'");
}

TEST(BatchScriptTest, QuotingSurvivesAHostileButValidPath) {
  AttemptPaths p = Paths();
  p.run_dir = "/data/it's $(rm -rf) `x` \"q\"";
  auto s = RenderBatchScript("printf '%s' @RUN_DIR@", p);
  ASSERT_TRUE(s.ok());
  auto r = RunCommand({"bash", "-c", *s});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, p.run_dir);
}

TEST(BatchScriptTest, RefusesUnsafeInputs) {
  AttemptPaths p = Paths();
  p.run_dir = "relative/dir";
  EXPECT_FALSE(RenderBatchScript("@RUN_DIR@", p).ok());
  p = Paths();
  p.worker_bin = "/bin/x\nrm -rf /";
  EXPECT_FALSE(RenderBatchScript("@WORKER@", p).ok());
  p = Paths();
  p.controller_addr = "host;reboot";
  EXPECT_FALSE(RenderBatchScript("@CONTROLLER@", p).ok());
  p = Paths();
  p.run_id = "../x";
  EXPECT_FALSE(RenderBatchScript("@RUN_ID@", p).ok());
  EXPECT_FALSE(RenderBatchScript("@NOT_A_KEY@", Paths()).ok());
  // Behind bash's own '@'s too, and not fooled by a value holding one.
  EXPECT_FALSE(RenderBatchScript("\"$@\" ${a[@]} @RUN_ID@ @TYPO@", Paths()).ok());
  p = Paths();
  p.run_dir = "/data/@RUN_ID@/x@Y@";
  auto at_in_value = RenderBatchScript("\"$@\" @RUN_DIR@ @RUN_ID@", p);
  ASSERT_TRUE(at_in_value.ok()) << at_in_value.status();
  EXPECT_EQ(*at_in_value, "\"$@\" '/data/@RUN_ID@/x@Y@' 'hello-1'");
}

TEST(BatchScriptTest, TheShippedTemplateRendersAndParses) {
  std::string tmpl;
  {
    auto r = RunCommand({"cat", std::string(TRELLIS_SOURCE_DIR) + "/deploy/slurm/trellis.sbatch.in"});
    ASSERT_TRUE(r.ok());
    tmpl = r->out;
  }
  auto s = RenderBatchScript(tmpl, Paths());
  ASSERT_TRUE(s.ok()) << s.status();
  auto syntax = RunCommand({"bash", "-n", "-c", *s});
  ASSERT_TRUE(syntax.ok());
  EXPECT_EQ(syntax->exit_code, 0) << syntax->err;
}

// The worker lines of the shipped script, run with `echo` as the worker.
TEST(BatchScriptTest, WorkersGetTheTlsCaAndTheAddressFileOnlyWhenThereAreSome) {
  auto r = RunCommand({"cat", std::string(TRELLIS_SOURCE_DIR) + "/deploy/slurm/trellis.sbatch.in"});
  ASSERT_TRUE(r.ok());
  const size_t at = r->out.find("dial=()");  // and the two lines after it
  ASSERT_NE(at, std::string::npos);
  size_t end = at;
  for (int line = 0; line < 3; ++line) end = r->out.find('\n', end + 1);
  const std::string probe = "TLS_CA=@TLS_CA@\nCONTROLLER_FILE=@CONTROLLER_FILE@\n" +
                            r->out.substr(at, end - at) +
                            "\nprintf '<%s>' ${dial[@]+\"${dial[@]}\"}";
  AttemptPaths p = Paths();
  auto plain = RenderBatchScript(probe, p);
  ASSERT_TRUE(plain.ok()) << plain.status();
  p.tls_ca = "/srv/trellis/out/controller ca.pem";
  auto tls = RenderBatchScript(probe, p);
  ASSERT_TRUE(tls.ok()) << tls.status();
  p.controller_file = "/shared/state/controller.address";
  auto both = RenderBatchScript(probe, p);
  ASSERT_TRUE(both.ok()) << both.status();
  auto plain_out = RunCommand({"bash", "-uc", *plain});
  auto tls_out = RunCommand({"bash", "-uc", *tls});
  auto both_out = RunCommand({"bash", "-uc", *both});
  ASSERT_TRUE(plain_out.ok() && tls_out.ok() && both_out.ok());
  EXPECT_EQ(plain_out->out, "<>");  // printf with no argument
  EXPECT_EQ(tls_out->out, "<--tls-ca></srv/trellis/out/controller ca.pem>");
  EXPECT_EQ(both_out->out,
            "<--tls-ca></srv/trellis/out/controller ca.pem>"
            "<--controller-file></shared/state/controller.address>");
  p.tls_ca = "relative.pem";
  EXPECT_FALSE(RenderBatchScript(probe, p).ok());
  p.tls_ca = "";
  p.controller_file = "state/controller.address";
  EXPECT_FALSE(RenderBatchScript(probe, p).ok());
}

// hello's spec with `slurm` and `rest` (TOML lines) after its [job].
spec::RunSpec HelloSpec(const std::string& slurm, const std::string& rest = "") {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(
      "[job]\nname = \"hello\"\ncommand = \"true\"\n[slurm]\n" + slurm + rest, &errors);
  EXPECT_TRUE(spec) << spec::JoinErrors(errors);
  return spec ? *spec : spec::RunSpec{};
}

TEST(SbatchArgsTest, DerivedFromTheSpec) {
  const spec::RunSpec spec = HelloSpec(R"(partition = "debug"
nodes = 2
spare_nodes = 1
nodelist = "node[1-3]"
time_limit = 30
extra_args = ["--qos=high"]
)");
  auto args = SbatchArgs(spec, Paths(), {"node4", "node5"});
  std::vector<std::string> want = {
      "--job-name=trellis-hello-1.2.5eed5eed",
      "--nodes=3",
      "--ntasks-per-node=1",
      "--output=/srv/trellis/out/hello-1/attempt-2/slurm-%j.out",
      "--open-mode=append",
      "--chdir=/srv/trellis/out/hello-1",
      "--signal=B:USR1@120",
      "--no-kill",
      "--time=30",
      "--partition=debug",
      "--nodelist=node[1-3]",
      "--exclude=node4,node5",
      "--qos=high"};
  EXPECT_EQ(args, want);
}

// A spare pool job: the run's partition, limit, GPUs and extra arguments, its
// own size and name, never the run's pinned nodelist, and a script that only
// holds the nodes.
TEST(SbatchArgsTest, APoolJobHoldsItsNodesUnderTheRunsLimits) {
  const spec::RunSpec spec = HelloSpec(R"(partition = "debug"
nodes = 2
gpus_per_node = 4
ranks_per_node = 4
nodelist = "node[1-3]"
time_limit = 30
extra_args = ["--qos=high"]
)", "[restart]\nspare_pool_nodes = 2\n");
  EXPECT_EQ(PoolJobName("hello-1", 3, "0123456789abcdef"), "trellis-pool-hello-1.3.01234567");
  const PoolStandbyPaths standby{"/opt/trellis/bin/trellis-worker", "login1:7000",
                                 PoolSecretPath("/srv/trellis/out/hello-1", 3), ""};
  auto args = PoolSbatchArgs(spec, "hello-1", "/srv/trellis/out/hello-1",
                             "trellis-pool-hello-1.3.01234567", 3, {"node1", "node2"}, standby);
  ASSERT_TRUE(args.ok()) << args.status();
  std::vector<std::string> want = {
      "--job-name=trellis-pool-hello-1.3.01234567",
      "--nodes=2",
      "--ntasks-per-node=1",
      "--output=/srv/trellis/out/hello-1/pool-3.out",
      "--open-mode=append",
      "--chdir=/srv/trellis/out/hello-1",
      "--no-kill",
      "--time=30",
      "--partition=debug",
      "--gpus-per-node=4",
      "--exclude=node1,node2",
      "--qos=high",
      "--wrap=srun --overlap --ntasks-per-node=1 --kill-on-bad-exit=0 "
      "'/opt/trellis/bin/trellis-worker' standby --controller 'login1:7000' --run 'hello-1' "
      "--pool 3 --run-dir '/srv/trellis/out/hello-1' --secret-file "
      "'/srv/trellis/out/hello-1/pool-3.secret'; exec sleep infinity"};
  EXPECT_EQ(*args, want);

  PoolStandbyPaths with_tls = standby;
  with_tls.tls_ca = "/srv/trellis/out/ca.pem";
  args = PoolSbatchArgs(spec, "hello-1", "/srv/trellis/out/hello-1", "n", 3, {}, with_tls);
  ASSERT_TRUE(args.ok());
  EXPECT_NE(args->back().find(" --tls-ca '/srv/trellis/out/ca.pem'; exec sleep infinity"),
            std::string::npos)
      << args->back();
  with_tls.controller_file = "/shared/state/controller.address";
  args = PoolSbatchArgs(spec, "hello-1", "/srv/trellis/out/hello-1", "n", 3, {}, with_tls);
  ASSERT_TRUE(args.ok());
  EXPECT_NE(args->back().find(" --controller-file '/shared/state/controller.address'; exec"),
            std::string::npos)
      << args->back();
  PoolStandbyPaths relative = standby;
  relative.worker_bin = "bin/trellis-worker";
  args = PoolSbatchArgs(spec, "hello-1", "/srv/trellis/out/hello-1", "n", 3, {}, relative);
  EXPECT_EQ(args.status().message(),
            "path 'bin/trellis-worker' must be absolute, without control characters");
  EXPECT_FALSE(PoolSbatchArgs(spec, "Hello 1", "/srv/x", "n", 3, {}, standby).ok());
}

}  // namespace
}  // namespace trellis::controller
