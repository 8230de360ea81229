// hal/env.h: the kernels' environment knobs (MSA_CUDA_*, MSA_TOPK_REGISTER, MSA_VK_*). A value
// that is not a number must be an msa::Error naming the variable, never a silent 0 (which
// turned a switch such as MSA_CUDA_DECODE_CLUSTER=true off under std::atoi).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hal/env.h"

namespace msa {
namespace {

std::string error_of(const char* value, long long lo = INT_MIN, long long hi = INT_MAX) {
  try {
    parse_env_int("MSA_TEST_KNOB", value, 7, lo, hi);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnvKnob, UnsetOrEmptyIsTheDefault) {
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", nullptr, 7), 7);
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "", -1), -1);
}

TEST(EnvKnob, NumbersAndWords) {
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "0", 7), 0);
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "16", 7), 16);
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "-1", 7), -1);
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "+2", 7), 2);
  for (const char* off : {"off", "OFF", "false", "no"}) EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", off, 7), 0) << off;
  for (const char* on : {"on", "True", "yes"}) EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", on, 7), 1) << on;
}

TEST(EnvKnob, GarbageNamesTheVariable) {
  for (const char* bad : {"abc", "4x", "1e3", " 4", "4 ", "-", "0x10", "99999999999999999999"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("environment variable MSA_TEST_KNOB"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
  }
}

TEST(EnvKnob, OutOfRange) {
  EXPECT_NE(error_of("4294967296").find("outside"), std::string::npos);  // > INT_MAX
  EXPECT_NE(error_of("-1", 0, 0xffffffffLL).find("outside [0, 4294967295]"), std::string::npos);
  EXPECT_EQ(parse_env_int("MSA_TEST_KNOB", "4294967295", 0, 0, 0xffffffffLL), 4294967295LL);
}

TEST(EnvKnob, EnvIntReadsTheEnvironment) {
  ::setenv("MSA_TEST_KNOB_ENV", "3", 1);
  EXPECT_EQ(env_int("MSA_TEST_KNOB_ENV", 1), 3);
  ::setenv("MSA_TEST_KNOB_ENV", "abc", 1);
  EXPECT_THROW(env_int("MSA_TEST_KNOB_ENV", 1), Error);
  ::unsetenv("MSA_TEST_KNOB_ENV");
  EXPECT_EQ(env_int("MSA_TEST_KNOB_ENV", 1), 1);
}

}  // namespace
}  // namespace msa
