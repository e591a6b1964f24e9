#pragma once
// `show`'s account of failures and recovery: the restart budget, a row per
// launch (srun step) with how it ended and what followed, and the health
// events the controller noticed while launches ran. Pure, like render.h.

#include <optional>
#include <string>

#include "cli/render.h"
#include "trellis/v1/controller.pb.h"

namespace trellis::cli {

// The run's restart budget ([restart] max_restarts) when its spec says;
// nullopt for a spec this binary cannot read.
std::optional<int> MaxRestarts(const std::string& spec_toml);

// "restarts   2 of 3 (1 relaunch in the allocation, 1 new attempt)\n", or ""
// when the run may not restart and has not (the header stays as it was).
std::string RenderRestarts(const v1::Run& run);

// "goodput    87.3% (running 3h12m, redone 6m, restarting 2m, gating 1m, queued 20m)\n":
// the run's time since submission by category (docs/architecture.md,
// "Goodput"), or "" when the controller sent none (an older controller).
std::string RenderGoodput(const v1::Run& run);
// checkpoint.every_steps = "auto": the newest interval chosen, from its health
// event among those the run carries; "" when none is there.
std::string RenderCheckpointInterval(const v1::Run& run);

// "launches": ATTEMPT.LAUNCH NODES STARTED DURATION CLASS EXIT BLAMED THEN,
// and under each launch that ended other than "succeeded" its reason and the
// useful fields of its evidence. "" when the controller sent no launches.
std::string RenderLaunches(const v1::Run& run, const TextOptions& opt);

// The controller sends a run's newest health events, this many.
inline constexpr int kHealthEventsKept = 20;

// "health events": TIME ATTEMPT.LAUNCH KIND RANK NODE DETAIL; "" when none.
std::string RenderHealthEvents(const v1::Run& run, const TextOptions& opt);

// All names up to three; else the first two and how many more:
// "node1,node2,+6". "-" for none.
std::string ShortNodeList(const google::protobuf::RepeatedPtrField<std::string>& nodes);

// One line from a launch's evidence_json for people: "rank 1 on node2; signal
// 9 (SIGKILL); markers nccl_error; log: ...". Keys it does not know follow as
// "key value". Text that is not a JSON object comes back cut to
// kEvidenceWidth characters; "" when there is nothing worth a line.
std::string EvidenceSummary(const std::string& evidence_json);
inline constexpr size_t kEvidenceWidth = 200;

}  // namespace trellis::cli
