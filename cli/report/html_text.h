#pragma once
// Text for `trellis report`'s page: HTML escaping and compact numbers. Pure.

#include <cstdint>
#include <string>
#include <string_view>

namespace trellis::cli::report {

// Safe inside element content and inside quoted attribute values: & < > " '
// are escaped, and control characters other than tab and newline (which a
// worker's log line may carry) become spaces. Run names, reasons and evidence
// come from users and workers: every such text goes through here.
std::string Escape(std::string_view text);

// Numbers for axes and tooltips, short and readable: "0", "0.25", "1.5",
// "12", "950", "12.3k", "4.56M", "1.2G"; "-" for NaN or infinity. Values below
// 0.01 (but not 0) use an exponent: "2.5e-05".
std::string Compact(double value);

// An exact count with thousands separated: "120,000".
std::string Grouped(int64_t n);

// Seconds for people: "850ms", "1.25s", "3m12s", "2h05m".
std::string Seconds(double seconds);

}  // namespace trellis::cli::report
