#include "controller/store/store.h"

namespace trellis::controller {

// Append only: each entry moves the schema from user_version i to i + 1.
const std::vector<const char*>& Migrations() {
  static const std::vector<const char*> kMigrations = {
      R"sql(
CREATE TABLE runs (
  seq INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  spec_toml TEXT NOT NULL,
  run_dir TEXT NOT NULL,
  state TEXT NOT NULL,
  state_reason TEXT NOT NULL DEFAULT '',
  nodes INTEGER NOT NULL,
  ranks_per_node INTEGER NOT NULL,
  restarts INTEGER NOT NULL DEFAULT 0,
  not_before_ms INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE INDEX runs_state ON runs(state);
CREATE TABLE attempts (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  slurm_job_id TEXT NOT NULL DEFAULT '',
  launches INTEGER NOT NULL DEFAULT 0,
  sbatch_args TEXT NOT NULL,
  nodelist TEXT NOT NULL DEFAULT '',
  secret TEXT NOT NULL,
  exit_code INTEGER,
  end_reason TEXT NOT NULL DEFAULT '',
  submitted_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  PRIMARY KEY (run_id, attempt)
);
CREATE TABLE run_events (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  unix_ms INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX run_events_run ON run_events(run_id, id);
CREATE TABLE steps (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  step INTEGER NOT NULL,
  ranks INTEGER NOT NULL,
  loss_sum REAL NOT NULL,
  tokens INTEGER NOT NULL,
  step_seconds_max REAL NOT NULL,
  last_json TEXT NOT NULL,
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt, launch, step)
);
CREATE TABLE nodes (
  name TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  evidence_json TEXT NOT NULL DEFAULT '{}',
  since_ms INTEGER NOT NULL,
  expiry_ms INTEGER,
  strikes INTEGER NOT NULL DEFAULT 0
);
)sql",
      // 2: quarantine bookkeeping and the gate's records.
      R"sql(
ALTER TABLE nodes ADD COLUMN actor TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN released_ms INTEGER;
CREATE TABLE gate_records (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  unix_ms INTEGER NOT NULL,
  decision TEXT NOT NULL,
  reason TEXT NOT NULL,
  policy_json TEXT NOT NULL,
  nodes_json TEXT NOT NULL
);
CREATE INDEX gate_records_run ON gate_records(run_id, attempt, launch);
)sql",
      // 3: how each launch ended (class, blamed node, evidence, what followed)
      // and health events (stragglers).
      R"sql(
CREATE TABLE launches (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  nodes TEXT NOT NULL DEFAULT '',
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  failure_class TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  reason TEXT NOT NULL DEFAULT '',
  blamed_node TEXT NOT NULL DEFAULT '',
  evidence_json TEXT NOT NULL DEFAULT '{}',
  recovery TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, attempt, launch)
);
CREATE TABLE health_events (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  rank INTEGER NOT NULL,
  node TEXT NOT NULL,
  detail TEXT NOT NULL,
  detail_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX health_events_run ON health_events(run_id, id);
)sql",
      // 4: the newest batch of step records stored per launch and node, so a
      // batch sent again is not stored twice.
      R"sql(
CREATE TABLE step_batches (
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  node TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt, launch, node)
) WITHOUT ROWID;
)sql",
      // 5: worker secrets are kept as their SHA-256 only (trellis_sha256 is
      // registered on the connection by Store::Open).
      R"sql(
ALTER TABLE attempts RENAME COLUMN secret TO secret_sha256;
UPDATE attempts SET secret_sha256 = trellis_sha256(secret_sha256);
)sql",
      // 6: what a launch's GO told every node, and the nodes a relaunch was
      // announced on, so that a controller started again gates and answers
      // as the one before it would have.
      R"sql(
ALTER TABLE launches ADD COLUMN go_json TEXT NOT NULL DEFAULT '';
ALTER TABLE launches ADD COLUMN next_nodes TEXT NOT NULL DEFAULT '';
)sql",
      // 7: the workers' final reports, so that a controller started again
      // knows which nodes of a running launch had finished before it.
      R"sql(
CREATE TABLE worker_reports (
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  launch INTEGER NOT NULL,
  node TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  exit_code INTEGER NOT NULL,
  reason TEXT NOT NULL,
  oom_kills INTEGER NOT NULL,
  time_limit_warned INTEGER NOT NULL,
  ranks_json TEXT NOT NULL,
  PRIMARY KEY (run_id, attempt, launch, node)
) WITHOUT ROWID;
)sql",
      // 8: attempts submitted ahead of the current one (restart.continuation
      // = "ahead"): waiting until taken up, and when Slurm may start them.
      R"sql(
ALTER TABLE attempts ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN begin_ms INTEGER;
)sql",
      // 9: spare pool jobs (restart.spare_pool_nodes), stored before their
      // sbatch like attempts.
      R"sql(
CREATE TABLE pool_jobs (
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  pool INTEGER NOT NULL,
  job_name TEXT NOT NULL,
  job_id TEXT NOT NULL DEFAULT '',
  nodes_asked INTEGER NOT NULL,
  nodelist TEXT NOT NULL DEFAULT '',
  submitted_ms INTEGER NOT NULL,
  standing_ms INTEGER,
  drawn_attempt INTEGER NOT NULL DEFAULT 0,
  drawn_launch INTEGER NOT NULL DEFAULT 0,
  ended_ms INTEGER,
  end_reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, pool)
) WITHOUT ROWID;
CREATE INDEX pool_jobs_live ON pool_jobs(ended_ms);
)sql",
      // 10: the digest of the secret a pool job's standby workers present.
      R"sql(
ALTER TABLE pool_jobs ADD COLUMN secret_sha256 TEXT NOT NULL DEFAULT '';
)sql",
      // 11: each node's newest certification check (certified return): its
      // job id is kept before sbatch answers, so a restart finds it.
      R"sql(
ALTER TABLE nodes ADD COLUMN check_job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN check_started_ms INTEGER;
ALTER TABLE nodes ADD COLUMN check_ended_ms INTEGER;
ALTER TABLE nodes ADD COLUMN check_passed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN check_summary TEXT NOT NULL DEFAULT '';
)sql",
  };
  return kMigrations;
}

}  // namespace trellis::controller
