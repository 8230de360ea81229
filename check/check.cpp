#include "check/check.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "check/case.h"
#include "hal/error.h"
#include "hal/registry.h"

namespace msa::cases {
namespace {

struct OpRow {
  int cases = 0, passed = 0, skipped = 0;
  double worst = 0, tol = 0, worst_ratio = -1;
  bool any_compared = false;
};

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

double ratio(double e, double t) {
  if (t > 0) return e / t;
  return e > 0 ? INFINITY : 0.0;
}

}  // namespace

int run_check(hal::Device& dev, std::string_view set, std::string_view op_filter, std::ostream& out,
              const std::string& match) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseList cases = make_cases(set, op_filter);
  if (!match.empty()) {
    std::regex re;
    try {
      re = std::regex(match);
    } catch (const std::regex_error& e) {
      throw Error("argument '--match': '" + match + "' is not a valid regular expression (" + e.what() + ")");
    }
    std::erase_if(cases, [&](const auto& c) { return !std::regex_search(c->vars(), re); });
    // A check that ran nothing must not pass: a typo in the pattern would look like success.
    if (cases.empty())
      throw Error("argument '--match': no case of set '" + std::string(set) +
                  (op_filter.empty() ? std::string() : "' for ops '" + std::string(op_filter)) + "' matches '" + match +
                  "'");
  }
  auto ref = hal::create_device("cpu-ref");
  std::map<std::string, OpRow> rows;
  std::vector<std::string> order;
  std::vector<std::string> failures;
  std::map<std::string, std::set<std::string>> skips;
  for (const auto& c : cases) {
    const std::string op = c->name();
    if (!rows.count(op)) order.push_back(op);
    OpRow& r = rows[op];
    ++r.cases;
    const CheckResult res = c->check(dev, *ref);
    if (res.skipped) {
      ++r.skipped;
      skips[op].insert(res.message);
      continue;
    }
    if (res.passed)
      ++r.passed;
    else
      failures.push_back(op + " [" + c->vars() + "]: " + res.message);
    double q = ratio(res.worst_error, res.tolerance);
    const bool no_metric = !res.passed && !(q > 1);  // an exception, a guard, a NaN
    if (no_metric) q = INFINITY;
    if (q > r.worst_ratio) {
      r.worst_ratio = q;
      r.worst = no_metric ? NAN : res.worst_error;
      r.tol = res.tolerance;
    }
    r.any_compared = true;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  char line[256];
  std::snprintf(line, sizeof line, "%-32s %6s %7s %8s %12s %12s\n", "op", "cases", "passed", "skipped", "worst error",
                "tolerance");
  out << line;
  int total = 0, passed = 0, skipped = 0;
  for (const std::string& op : order) {
    const OpRow& r = rows[op];
    total += r.cases;
    passed += r.passed;
    skipped += r.skipped;
    const std::string worst = !r.any_compared ? "-" : std::isnan(r.worst) ? "error" : fmt("%.3g", r.worst);
    const std::string tol = r.any_compared ? fmt("%.3g", r.tol) : "-";
    std::snprintf(line, sizeof line, "%-32s %6d %7d %8d %12s %12s%s\n", op.c_str(), r.cases, r.passed, r.skipped,
                  worst.c_str(), tol.c_str(), r.passed + r.skipped < r.cases ? "  FAIL" : "");
    out << line;
  }
  std::snprintf(line, sizeof line, "%-32s %6d %7d %8d   (%.1f s)\n", "total", total, passed, skipped, secs);
  out << line;
  for (const auto& [op, reasons] : skips)
    for (const std::string& why : reasons) out << "skipped " << op << ": " << why << "\n";
  for (const std::string& f : failures) out << "FAILED " << f << "\n";
  return static_cast<int>(failures.size());
}

}  // namespace msa::cases
