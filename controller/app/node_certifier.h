#pragma once
// Certified return (docs/architecture.md, "Quarantine"): on every
// reconciliation tick, each node whose quarantine expired ("checking") gets
// a short Slurm job pinned to it, the check: `trellis-worker check
// --certify`, or the site's own command. The job writes its exit code and
// the tail of its output to a result file under the output root, which the
// shell reads and hands in (no accounting needed). The rules are
// controller/core/certify.h; this part stores the check before its sbatch
// (a restart finds it, and the job by its name), and returns a pass, a
// failure (a strike) or a cancelled check that never answered.

#include <map>
#include <set>
#include <string>

#include "controller/app/effects.h"
#include "controller/app/loop_context.h"

namespace trellis::controller {

class NodeCertifier {
 public:
  explicit NodeCertifier(LoopContext ctx) : ctx_(ctx) {}

  // Where the checks' scripts, logs and results are: <output_root>/certify.
  std::string Dir() const;
  // Node -> the result file of its check in flight, for the shell to read.
  std::map<std::string, std::string> ResultFiles();
  // Every reconciliation tick; `found`: node -> its result file's text,
  // for those that exist.
  Effects Tick(const std::map<std::string, std::string>& found);
  // sbatch of a check answered.
  Effects OnSubmitted(const JobSubmitted& answer);

 private:
  // The check's paths without their suffix: <dir>/<node>-<started ms>.
  std::string Base(const std::string& node, WallTime started) const;
  SubmitJob CheckJob(const std::string& node, WallTime started) const;
  // The check ended in a failure: stored, and a strike with what it said.
  Effects Failed(const QuarantineEntry& e, const std::string& summary, const std::string& output,
                 WallTime now) const;

  LoopContext ctx_;
  // Nodes whose check's sbatch is unanswered.
  std::set<std::string> submitting_;
};

}  // namespace trellis::controller
