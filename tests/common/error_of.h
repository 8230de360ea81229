// Message of the msa::Error that `fn` throws ("" if it throws nothing; any other exception
// propagates and fails the test).
#pragma once
#include <string>

#include "hal/error.h"

namespace msa::test {

template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const msa::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace msa::test
