// --param key=value pairs of `msa op`: typed lookups with defaults, and a final check
// that every given key was used by the op (an unknown key is an error naming it).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace msa::cli {

class OpParams {
 public:
  // Parses "key=value" strings; throws msa::Error on a malformed or repeated pair.
  explicit OpParams(const std::vector<std::string>& pairs);
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  long long get_int(const std::string& key, long long fallback);
  double get_float(const std::string& key, double fallback);
  std::string get_str(const std::string& key, const std::string& fallback);
  // Throws msa::Error naming the first key no getter asked for.
  void check_all_used(const std::string& op) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

}  // namespace msa::cli
