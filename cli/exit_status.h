#pragma once
// The CLI's exit-code contract (docs/architecture.md and the README)
// and how a failed call is told to the user. Pure: no I/O, no channel.

#include <grpcpp/support/status_code_enum.h>

#include <string>
#include <string_view>
#include <vector>

#include "trellis/v1/types.pb.h"

namespace trellis::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitRunFailed = 1,    // watch: the run ended FAILED or CANCELLED; also any other error
  kExitUsage = 2,        // usage or validation error
  kExitNotFound = 3,     // no such run
  kExitNotAllowed = 4,   // not authenticated or not allowed
  kExitUnreachable = 5,  // the controller could not be reached
  kExitNoSpace = 6,      // the controller could not store the request: its disk is full
};

// `connected`: whether the channel had reached the controller when the call
// failed. DEADLINE_EXCEEDED before connecting means unreachable; after, the
// controller is there but slow, which is an ordinary error.
int ExitCodeFor(grpc::StatusCode code, bool connected);

// The exit code of `watch` once the run is terminal: 0 for SUCCEEDED, 1 for
// FAILED or CANCELLED.
int ExitCodeForFinalState(v1::RunState state);

// Splits the controller's validation message ("a.b: x; c: y; ...") into one
// entry per field. A "; " inside one field's message is kept: a new entry
// starts only where the text after "; " reads "<field>: ".
std::vector<std::string> SplitFieldErrors(std::string_view message);

// What to print (without the "trellis: " prefix), one entry per line.
// `addr` is the address that was tried.
std::vector<std::string> DescribeError(grpc::StatusCode code, std::string_view message,
                                       std::string_view addr, bool connected);

}  // namespace trellis::cli
