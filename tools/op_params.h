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
  // A float parameter; throws msa::Error naming it unless the text is a finite number
  // that survives the conversion to float (so 1e-50 is an error, not 0).
  float get_float(const std::string& key, float fallback);
  // A parameter whose 0 is the op's "default" sentinel (scale): absent gives 0, a given
  // value must be a nonzero float, so no user value means "default".
  float get_nonzero_float(const std::string& key);
  std::string get_str(const std::string& key, const std::string& fallback);
  // Throws msa::Error naming the first key no getter asked for.
  void check_all_used(const std::string& op) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

}  // namespace msa::cli
