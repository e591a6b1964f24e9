#include "cli/format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cli/render.h"

namespace trellis::cli {
namespace {

using std::chrono::milliseconds;

TEST(CliFormatTest, StateNames) {
  struct Case {
    v1::RunState state;
    const char* name;
  };
  for (const Case& c : std::vector<Case>{{v1::RUN_STATE_UNSPECIFIED, "UNSPECIFIED"},
                                         {v1::RUN_STATE_QUEUED, "QUEUED"},
                                         {v1::RUN_STATE_RUNNING, "RUNNING"},
                                         {v1::RUN_STATE_SUCCEEDED, "SUCCEEDED"},
                                         {v1::RUN_STATE_CANCELLED, "CANCELLED"},
                                         {static_cast<v1::RunState>(42), "STATE_42"}}) {
    EXPECT_EQ(StateName(c.state), c.name) << static_cast<int>(c.state);
  }
  EXPECT_TRUE(IsTerminal(v1::RUN_STATE_FAILED));
  EXPECT_FALSE(IsTerminal(v1::RUN_STATE_RESTARTING));
}

TEST(CliFormatTest, Durations) {
  struct Case {
    int64_t ms;
    const char* text;
  };
  for (const Case& c : std::vector<Case>{{-5, "0ms"},
                                         {0, "0ms"},
                                         {850, "850ms"},
                                         {1000, "1s"},
                                         {45'999, "45s"},
                                         {60'000, "1m00s"},
                                         {192'000, "3m12s"},
                                         {3'599'000, "59m59s"},
                                         {3'600'000, "1h00m"},
                                         {7'500'000, "2h05m"},
                                         {86'400'000, "1d00h"},
                                         {273'600'000, "3d04h"}}) {
    EXPECT_EQ(FormatDuration(milliseconds(c.ms)), c.text) << c.ms;
  }
}

TEST(CliFormatTest, Ages) {
  const int64_t now = 1'700'000'000'000;
  struct Case {
    int64_t then;
    const char* text;
  };
  for (const Case& c : std::vector<Case>{{0, "-"},
                                         {now + 5000, "0s"},  // clock skew: never negative
                                         {now - 12'000, "12s"},
                                         {now - 3 * 60'000 - 59'000, "3m"},
                                         {now - 2 * 3'600'000, "2h"},
                                         {now - 5 * 86'400'000LL, "5d"}}) {
    EXPECT_EQ(FormatAge(now, c.then), c.text) << c.then;
  }
}

TEST(CliFormatTest, Times) {
  EXPECT_EQ(FormatTime(0, true), "-");
  EXPECT_EQ(FormatTime(1'700'000'000'123, true), "2023-11-14 22:13:20");
}

TEST(CliFormatTest, Truncate) {
  struct Case {
    std::string in;
    size_t width;
    std::string out;
  };
  for (const Case& c :
       std::vector<Case>{{"short", 10, "short"},
                         {"exactly10!", 10, "exactly10!"},
                         {"needs 4 nodes, 3 eligible", 10, "needs 4..."},
                         {"abcdef", 2, "ab"},
                         // Never cut inside a UTF-8 character.
                         {"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4, "\xc3\xa9..."}}) {
    EXPECT_EQ(Truncate(c.in, c.width), c.out) << c.in;
  }
}

TEST(CliFormatTest, Numbers) {
  EXPECT_EQ(FormatShape(4, 8), "4x8");
  EXPECT_EQ(FormatLoss(2.345678), "2.3457");
  EXPECT_EQ(FormatLoss(std::nan("")), "-");
  EXPECT_EQ(FormatSeconds(1.234), "1.23");
  struct Case {
    int64_t tokens;
    double seconds;
    const char* text;
  };
  for (const Case& c : std::vector<Case>{{4096, 0, "-"},
                                         {4096, -1, "-"},
                                         {950, 1, "950"},
                                         {16384, 0.8, "20.5k"},
                                         {25'165'824, 2, "12.58M"},
                                         {int64_t{3} << 40, 1, "3298.53G"}}) {
    EXPECT_EQ(FormatRate(c.tokens, c.seconds), c.text) << c.tokens << "/" << c.seconds;
  }
}

TEST(CliFormatTest, TableAlignsColumnsWithoutTrailingSpaces) {
  Table t({"RUN", "STATE", "REASON"});
  t.AddRow({"hello-1", "RUNNING", ""});
  t.AddRow({"x", "QUEUED", "needs 4 nodes"});
  EXPECT_EQ(t.Render(),
            "RUN      STATE    REASON\n"
            "hello-1  RUNNING\n"
            "x        QUEUED   needs 4 nodes\n");
}

v1::Run SampleRun() {
  v1::Run run;
  auto* s = run.mutable_summary();
  s->set_run_id("hello-1");
  s->set_name("hello");
  s->set_user("alice");
  s->set_state(v1::RUN_STATE_FAILED);
  s->set_state_reason("rank 1 on node2 exited with 3");
  s->set_nodes(2);
  s->set_ranks_per_node(2);
  s->set_attempts(1);
  s->set_created_unix_ms(1'700'000'000'000);
  s->set_updated_unix_ms(1'700'000'060'000);
  s->set_last_step(10);
  s->set_last_loss(1.25);
  run.set_run_dir("/runs/hello-1");
  run.set_spec_toml("[job]\nname = \"hello\"\n");
  auto* a = run.add_attempts();
  a->set_attempt(1);
  a->set_slurm_job_id("1234");
  a->set_launches(1);
  a->add_sbatch_args("--nodes=2");
  a->add_sbatch_args("--exclude=node9");
  a->add_nodes("node1");
  a->add_nodes("node2");
  a->set_exit_code(3);
  a->set_end_reason("rank failed");
  a->set_submitted_unix_ms(1'700'000'001'000);
  a->set_ended_unix_ms(1'700'000'059'000);
  auto* e = run.add_events();
  e->set_unix_ms(1'700'000'059'000);
  e->set_from(v1::RUN_STATE_RUNNING);
  e->set_to(v1::RUN_STATE_FAILED);
  e->set_reason("rank 1 on node2 exited with 3");
  e->set_evidence_json(R"({"rank":1,"exit_code":3})");
  auto* step = run.add_recent_steps();
  step->set_attempt(1);
  step->set_launch(1);
  step->set_step(10);
  step->set_ranks(4);
  step->set_loss(1.25);
  step->set_tokens(16384);
  step->set_step_seconds(0.5);
  step->mutable_last()->set_step(10);
  step->mutable_last()->set_grad_norm(0.75);
  return run;
}

TEST(CliFormatJsonTest, RunIsOneFlatObject) {
  Json j = RunToJson(SampleRun());
  EXPECT_EQ(j["run_id"], "hello-1");
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["state_reason"], "rank 1 on node2 exited with 3");
  EXPECT_EQ(j["last_step"], 10);
  EXPECT_EQ(j["run_dir"], "/runs/hello-1");
  ASSERT_TRUE(j["attempts"].is_array());
  EXPECT_EQ(j["attempts"][0]["slurm_job_id"], "1234");
  EXPECT_EQ(j["attempts"][0]["exit_code"], 3);
  EXPECT_EQ(j["attempts"][0]["nodes"], Json::array({"node1", "node2"}));
  EXPECT_EQ(j["attempts"][0]["sbatch_args"][1], "--exclude=node9");
  EXPECT_EQ(j["events"][0]["from"], "RUNNING");
  EXPECT_EQ(j["events"][0]["evidence"]["exit_code"], 3);  // embedded, not a string
  EXPECT_EQ(j["recent_steps"][0]["ranks"], 4);
  EXPECT_DOUBLE_EQ(j["recent_steps"][0]["tokens_per_second"].get<double>(), 32768.0);
  EXPECT_DOUBLE_EQ(j["recent_steps"][0]["last"]["grad_norm"].get<double>(), 0.75);
  EXPECT_FALSE(j["recent_steps"][0]["last"].contains("fwd_seconds"));  // unset: absent
}

TEST(CliFormatJsonTest, EdgeValues) {
  v1::RunSummary s;
  s.set_last_step(-1);
  s.set_last_loss(0);
  EXPECT_TRUE(SummaryToJson(s)["last_loss"].is_null());  // no step yet
  s.set_last_step(3);
  s.set_last_loss(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(SummaryToJson(s)["last_loss"].is_null());  // NaN has no JSON spelling
  EXPECT_EQ(SummaryToJson(s).dump().find("NaN"), std::string::npos);

  v1::RunEvent e;
  EXPECT_TRUE(EventToJson(e)["evidence"].is_null());
  e.set_evidence_json("not json");
  EXPECT_EQ(EventToJson(e)["evidence"], "not json");

  v1::SubmitRunResponse r;
  r.set_run_id("hello-2");
  EXPECT_EQ(SubmitToJson(r, false).dump(), R"({"run_id":"hello-2"})");
  r.set_batch_script("#!/bin/bash\n");
  r.add_sbatch_args("--parsable");
  EXPECT_EQ(SubmitToJson(r, true).dump(),
            R"({"batch_script":"#!/bin/bash\n","sbatch_args":["--parsable"]})");
  r.set_gate_policy_json(R"({"min_free_gib_per_socket":100.0,"rank_host_gib":2.5})");
  EXPECT_EQ(SubmitToJson(r, true)["gate_policy"]["rank_host_gib"], 2.5);
}

TEST(CliFormatJsonTest, WatchEventsAreKeyedByKind) {
  v1::WatchRunEvent e;
  e.mutable_transition()->set_to(v1::RUN_STATE_RUNNING);
  EXPECT_EQ(WatchEventToJson(e)["transition"]["to"], "RUNNING");
  e.mutable_step()->set_step(7);
  EXPECT_EQ(WatchEventToJson(e)["step"]["step"], 7);
  *e.mutable_snapshot() = SampleRun();
  EXPECT_EQ(WatchEventToJson(e)["snapshot"]["run_id"], "hello-1");
}

TEST(CliRenderTest, RunList) {
  v1::ListRunsResponse list;
  *list.add_runs() = SampleRun().summary();
  auto* q = list.add_runs();
  q->set_run_id("big-3");
  q->set_state(v1::RUN_STATE_QUEUED);
  q->set_state_reason(std::string(60, 'r'));
  q->set_nodes(96);
  q->set_ranks_per_node(4);
  q->set_last_step(-1);
  q->set_created_unix_ms(1'700'000'000'000);
  std::string text = RenderRunList(list, TextOptions{1'700'000'120'000, true});
  EXPECT_EQ(text,
            "RUN      STATE   NODES  ATTEMPTS  STEP  LOSS    AGE  REASON\n"
            "hello-1  FAILED  2x2    1         10    1.2500  2m   rank 1 on node2 exited with 3\n"
            "big-3    QUEUED  96x4   0         -     -       2m   " +
                std::string(45, 'r') + "...\n");
  // A run started from a checkpoint: a FROM column, a path cut at its start.
  list.mutable_runs(0)->set_init_from("tiny-moe-3@40");
  q->set_init_from("/data/team/pretrained/checkpoints-final@1200");
  q->set_state_reason("");
  EXPECT_EQ(RenderRunList(list, TextOptions{1'700'000'120'000, true}),
            "RUN      STATE   NODES  ATTEMPTS  STEP  LOSS    AGE  "
            "FROM                              REASON\n"
            "hello-1  FAILED  2x2    1         10    1.2500  2m   "
            "tiny-moe-3@40                     rank 1 on node2 exited with 3\n"
            "big-3    QUEUED  96x4   0         -     -       2m   "
            "...rained/checkpoints-final@1200\n");
  EXPECT_EQ(RunListToJson(list)[0]["init_from"], "tiny-moe-3@40");
  list.mutable_runs(0)->clear_init_from();
  EXPECT_EQ(RunListToJson(list)[0]["init_from"], "");
}

TEST(CliRenderTest, ShowHasAttemptsEventsAndSteps) {
  std::string text = RenderRun(SampleRun(), TextOptions{1'700'000'120'000, true});
  for (const char* part :
       {"run        hello-1 (hello)\n", "state      FAILED: rank 1 on node2 exited with 3\n",
        "user       alice\n", "nodes      2 x 2 ranks\n", "run dir    /runs/hello-1\n",
        "#1  slurm job 1234  launches 1  exit 3, rank failed\n", "nodes      node1,node2\n",
        "submitted  2023-11-14 22:13:21\n", "sbatch     --nodes=2 --exclude=node9\n",
        "2023-11-14 22:14:19  RUNNING -> FAILED  rank 1 on node2 exited with 3  "
        "{\"rank\":1,\"exit_code\":3}\n",
        "ATTEMPT  LAUNCH  STEP  LOSS    TOKENS/S  STEP_S  RANKS\n",
        "1        1       10    1.2500  32.8k     0.50    4\n"}) {
    EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\nin:\n" << text;
  }
}

TEST(CliRenderTest, WatchRowsAndProgress) {
  v1::StepSummary s = SampleRun().recent_steps(0);
  EXPECT_EQ(RenderStepHeader(std::nullopt), "    STEP        LOSS    TOKENS/S    STEP_S  RANKS\n");
  EXPECT_EQ(RenderStepRow(s, std::nullopt), "      10      1.2500       32.8k      0.50      4\n");
  EXPECT_EQ(RenderStepRow(s, 40),
            "      10      1.2500       32.8k      0.50      4  "
            "[#####...............]  25%\n");
  EXPECT_EQ(ProgressBar(0, 10, 4), "[....]   0%");
  EXPECT_EQ(ProgressBar(15, 10, 4), "[####] 100%");
  EXPECT_EQ(ProgressBar(1, 0, 4), "");
  v1::RunEvent e = SampleRun().events(0);
  EXPECT_EQ(RenderTransition(e, TextOptions{0, true}),
            "22:14:19  RUNNING -> FAILED  rank 1 on node2 exited with 3\n");
}

// A GPU run's step: its record carries the allocator's figures and NCCL's CTAs.
v1::StepSummary GpuStep(int64_t step, bool ctas = true) {
  v1::StepSummary s = SampleRun().recent_steps(0);
  s.set_step(step);
  v1::StepRecord* r = s.mutable_last();
  r->set_step(step);
  r->set_alloc_retries(2);
  r->set_mem_reserved_peak_bytes(int64_t{7} << 29);  // 3.5 GiB
  if (ctas) r->set_nccl_max_ctas(16);
  return s;
}

TEST(CliFormatTest, GiB) {
  EXPECT_EQ(FormatGiB(0), "0.00");
  EXPECT_EQ(FormatGiB(int64_t{7} << 29), "3.50");
  EXPECT_EQ(FormatGiB(66'249'891'430), "61.70");
}

TEST(CliRenderTest, ShowHasGpuColumnsOnlyWhenARecordHasThem) {
  // A CPU run's table is as it always was (also ShowHasAttemptsEventsAndSteps).
  std::string cpu = RenderRun(SampleRun(), TextOptions{1'700'000'120'000, true});
  EXPECT_EQ(cpu.find("RETRIES"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("NCCL_CTAS"), std::string::npos) << cpu;

  // A GPU run: the latest step with every figure, an older one of one GPU
  // (no NCCL), one without a record.
  v1::Run run = SampleRun();
  run.clear_recent_steps();
  *run.add_recent_steps() = GpuStep(12);
  *run.add_recent_steps() = GpuStep(11, /*ctas=*/false);
  v1::StepSummary bare = SampleRun().recent_steps(0);
  bare.clear_last();
  *run.add_recent_steps() = bare;
  std::string text = RenderRun(run, TextOptions{1'700'000'120'000, true});
  const std::string table =
      "ATTEMPT  LAUNCH  STEP  LOSS    TOKENS/S  STEP_S  RANKS  RETRIES  RESV_PEAK_GIB  NCCL_CTAS\n"
      "1        1       12    1.2500  32.8k     0.50    4      2        3.50           16\n"
      "1        1       11    1.2500  32.8k     0.50    4      2        3.50           -\n"
      "1        1       10    1.2500  32.8k     0.50    4      -        -              -\n";
  EXPECT_NE(text.find(table), std::string::npos) << text;

  // Only the columns some record has.
  run.clear_recent_steps();
  *run.add_recent_steps() = GpuStep(11, /*ctas=*/false);
  text = RenderRun(run, TextOptions{1'700'000'120'000, true});
  EXPECT_NE(text.find("RANKS  RETRIES  RESV_PEAK_GIB\n1 "), std::string::npos) << text;
  EXPECT_EQ(text.find("NCCL_CTAS"), std::string::npos) << text;
}

v1::RankLatest Rank(int rank, const std::string& node, int64_t reserved_bytes) {
  v1::RankLatest r;
  r.set_attempt(1);
  r.set_launch(2);
  r.set_rank(rank);
  r.set_node(node);
  r.set_received_unix_ms(1'700'000'115'000);
  v1::StepRecord* rec = r.mutable_record();
  rec->set_step(30);
  rec->set_loss(1.5);
  rec->set_tokens(4096);
  rec->set_step_seconds(0.25);
  rec->set_alloc_retries(rank);
  rec->set_mem_reserved_peak_bytes(reserved_bytes);
  rec->set_nccl_max_ctas(16);
  return r;
}

TEST(CliRenderTest, ShowHasTheRanksGpuFiguresWhenTheControllerSentThem) {
  v1::Run run = SampleRun();
  *run.add_ranks() = Rank(0, "node1", int64_t{7} << 29);
  *run.add_ranks() = Rank(1, "node2", int64_t{1} << 30);
  run.mutable_ranks(1)->mutable_record()->clear_nccl_max_ctas();
  run.set_ranks_world(4);
  run.set_ranks_reported(3);
  const TextOptions opt{1'700'000'120'000, true};
  std::string text = RenderRun(run, opt);
  const std::string ranks =
      "\nranks (latest record of each; attempt 1, launch 2; 3 of 4 reported)\n"
      "RANK  NODE   STEP  STEP_S  RETRIES  RESV_PEAK_GIB  NCCL_CTAS  SEEN\n"
      "0     node1  30    0.25    0        3.50           16         5s ago\n"
      "1     node2  30    0.25    1        1.00           -          5s ago\n";
  EXPECT_NE(text.find(ranks), std::string::npos) << text;
  EXPECT_EQ(text.find("more ranks"), std::string::npos) << text;
  // A further page, and the command that shows it.
  run.set_ranks_next(2);
  text = RenderRun(run, opt);
  EXPECT_NE(text.find(ranks + "(more ranks: trellis show hello-1 --ranks-from 2)\n"),
            std::string::npos)
      << text;

  // A CPU run's ranks (no GPU figure): no section, `show` as it always was.
  for (auto& r : *run.mutable_ranks()) {
    r.mutable_record()->clear_alloc_retries();
    r.mutable_record()->clear_mem_reserved_peak_bytes();
    r.mutable_record()->clear_nccl_max_ctas();
  }
  EXPECT_EQ(RenderRun(run, opt), RenderRun(SampleRun(), opt));
}

TEST(CliFormatJsonTest, ShowHasTheRanksRecords) {
  v1::Run run = SampleRun();
  *run.add_ranks() = Rank(3, "node2", 1024);
  run.set_ranks_world(4);
  run.set_ranks_reported(1);
  Json j = RunToJson(run, /*with_ranks=*/true);
  ASSERT_EQ(j["ranks"].size(), 1u);
  EXPECT_EQ(j["ranks"][0]["rank"], 3);
  EXPECT_EQ(j["ranks"][0]["node"], "node2");
  EXPECT_EQ(j["ranks"][0]["received_unix_ms"], 1'700'000'115'000);
  EXPECT_EQ(j["ranks"][0]["record"]["mem_reserved_peak_bytes"], 1024);
  EXPECT_EQ(j["ranks"][0]["record"]["nccl_max_ctas"], 16);
  EXPECT_EQ(j["ranks_world"], 4);
  EXPECT_EQ(j["ranks_reported"], 1);
  EXPECT_EQ(j["ranks_next"], 0);
  // Watch snapshots (and a plain run object) have no rank fields.
  EXPECT_FALSE(RunToJson(run).contains("ranks"));
}

TEST(CliRenderTest, WatchRowsWithGpuColumns) {
  StepColumns all{true, true, true};
  EXPECT_EQ(ColumnsOf(SampleRun().recent_steps(0)).any(), false);
  StepColumns got = ColumnsOf(GpuStep(10));
  EXPECT_TRUE(got.retries && got.reserved && got.ctas);
  EXPECT_FALSE(ColumnsOf(GpuStep(10, false)).ctas);
  EXPECT_EQ(RenderStepHeader(std::nullopt, all),
            "    STEP        LOSS    TOKENS/S    STEP_S  RANKS  RETRIES  RESV_PEAK_GIB  NCCL_CTAS\n");
  EXPECT_EQ(RenderStepRow(GpuStep(10), std::nullopt, all),
            "      10      1.2500       32.8k      0.50      4        2           3.50         16\n");
  // A row without a figure shows "-"; the progress bar stays last.
  EXPECT_EQ(RenderStepRow(GpuStep(10, false), 40, all),
            "      10      1.2500       32.8k      0.50      4        2           3.50          -  "
            "[#####...............]  25%\n");
  EXPECT_EQ(RenderStepHeader(40, StepColumns{false, false, true}),
            "    STEP        LOSS    TOKENS/S    STEP_S  RANKS  NCCL_CTAS  PROGRESS\n");
  // Without columns: as before (WatchRowsAndProgress).
  EXPECT_EQ(RenderStepRow(GpuStep(10), std::nullopt),
            "      10      1.2500       32.8k      0.50      4\n");
}

// A MoE run's step: the routing figures of its record (the step's, the same
// on every rank) are two more columns of the step tables, not of the ranks'.
TEST(CliRenderTest, StepTablesShowTheExpertLoadWhereRecordsCarryIt) {
  EXPECT_EQ(FormatRatio(1.0), "1.00x");
  EXPECT_EQ(FormatRatio(1.0749), "1.07x");
  v1::Run run = SampleRun();
  run.clear_recent_steps();
  v1::StepSummary moe = GpuStep(12);
  moe.mutable_last()->set_expert_load_max_over_mean(1.8);
  moe.mutable_last()->set_ep_load_max_over_mean(1.0749);
  *run.add_recent_steps() = moe;
  v1::StepSummary dense = GpuStep(11);  // a record without them
  *run.add_recent_steps() = dense;
  const std::string text = RenderRun(run, TextOptions{1'700'000'120'000, true});
  const std::string table =
      "ATTEMPT  LAUNCH  STEP  LOSS    TOKENS/S  STEP_S  RANKS  RETRIES  RESV_PEAK_GIB  NCCL_CTAS  "
      "EXPERT_LOAD  EP_LOAD\n"
      "1        1       12    1.2500  32.8k     0.50    4      2        3.50           16         "
      "1.80x        1.07x\n"
      "1        1       11    1.2500  32.8k     0.50    4      2        3.50           16         "
      "-            -\n";
  EXPECT_NE(text.find(table), std::string::npos) << text;

  // watch: the same columns, fixed widths.
  const StepColumns columns = ColumnsOf(moe);
  EXPECT_TRUE(columns.expert_load && columns.ep_load);
  EXPECT_EQ(RenderStepHeader(std::nullopt, columns),
            "    STEP        LOSS    TOKENS/S    STEP_S  RANKS  RETRIES  RESV_PEAK_GIB  NCCL_CTAS  "
            "EXPERT_LOAD  EP_LOAD\n");
  EXPECT_EQ(RenderStepRow(moe, std::nullopt, columns),
            "      12      1.2500       32.8k      0.50      4        2           3.50         16  "
            "      1.80x    1.07x\n");

  // A rank whose record has only them: no ranks section (nothing per rank to see).
  v1::Run cpu = SampleRun();
  v1::RankLatest* rank = cpu.add_ranks();
  rank->set_rank(0);
  rank->mutable_record()->set_expert_load_max_over_mean(1.5);
  const TextOptions opt{1'700'000'120'000, true};
  EXPECT_EQ(RenderRun(cpu, opt).find("\nranks ("), std::string::npos);

  Json j = StepRecordToJson(moe.last());
  EXPECT_EQ(j["expert_load_max_over_mean"], 1.8);
  EXPECT_EQ(j["ep_load_max_over_mean"], 1.0749);
  EXPECT_FALSE(StepRecordToJson(dense.last()).contains("ep_load_max_over_mean"));
  // The phases' memory peaks: in the JSON, not in the tables.
  moe.mutable_last()->set_mem_allocated_peak_bwd_bytes(int64_t{3} << 30);
  EXPECT_EQ(StepRecordToJson(moe.last())["mem_allocated_peak_bwd_bytes"], int64_t{3} << 30);
  EXPECT_FALSE(StepRecordToJson(moe.last()).contains("mem_allocated_peak_fwd_bytes"));
  // The checkpoint time after a step: in the JSON, only on steps that had one.
  EXPECT_FALSE(StepRecordToJson(moe.last()).contains("checkpoint_seconds"));
  moe.mutable_last()->set_checkpoint_seconds(1.25);
  EXPECT_EQ(StepRecordToJson(moe.last())["checkpoint_seconds"], 1.25);
}

TEST(CliRenderTest, TotalStepsOnlyForModelRuns) {
  EXPECT_EQ(TotalSteps("[job]\nname = \"x\"\ncommand = \"true\"\n"), std::nullopt);
  EXPECT_EQ(TotalSteps("not toml ["), std::nullopt);
  EXPECT_EQ(TotalSteps("[job]\nname = \"m\"\n[model]\nlayers = 2\n[training]\nsteps = 300\n"), 300);
}

}  // namespace
}  // namespace trellis::cli
