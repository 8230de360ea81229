// `msa check`: runs a case set on a device against cpu-ref and prints one row per op.
#pragma once
#include <ostream>
#include <string>
#include <string_view>

#include "hal/device.h"

namespace msa::cases {

// Runs the cases of `set` ("quick" | "full") matching `op_filter` ("" = all; comma-
// separated op names) on `dev`, each against a fresh cpu-ref device, and prints a table:
// op, cases, passed, skipped, worst error, tolerance; then every failing case with its
// vars() and message, and every skip reason once. Returns the number of failed cases.
// `match` (ECMAScript regex, "" = all) keeps only the cases whose vars() contain a match;
// an invalid pattern, or one that leaves no case, throws msa::Error naming '--match'.
int run_check(hal::Device& dev, std::string_view set, std::string_view op_filter, std::ostream& out,
              const std::string& match = "");

}  // namespace msa::cases
