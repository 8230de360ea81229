// hal/tuning.h: knobs read from the environment once, set by name, listed for msa devices.
#include "hal/tuning.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>

namespace msa::hal {
namespace {

struct Settings {
  int mode = 0;
  int level = 0;
  int hook = 0;
};
constexpr const char* kModeNames[] = {"slow", "fast"};
constexpr std::array<Knob<Settings>, 3> kKnobs{{
    {"mode", "MSA_TEST_TUNING_MODE", &Settings::mode, 1, 0, 1, "slow or fast", kModeNames},
    {"level", "MSA_TEST_TUNING_LEVEL", &Settings::level, 2, 0, 2, "0..2"},
    {"hook", nullptr, &Settings::hook, 0, 0, 8, "test hook"},
}};
std::span<const Knob<Settings>> knobs() { return kKnobs; }

TEST(Tuning, DefaultsWithoutEnvironment) {
  unsetenv("MSA_TEST_TUNING_MODE");
  unsetenv("MSA_TEST_TUNING_LEVEL");
  const Settings s = tuning_from_env(knobs());
  EXPECT_EQ(s.mode, 1);
  EXPECT_EQ(s.level, 2);
  EXPECT_EQ(s.hook, 0);
}

TEST(Tuning, EnvironmentTakesNamesNumbersAndOnOff) {
  setenv("MSA_TEST_TUNING_MODE", "slow", 1);
  setenv("MSA_TEST_TUNING_LEVEL", "off", 1);
  Settings s = tuning_from_env(knobs());
  EXPECT_EQ(s.mode, 0);
  EXPECT_EQ(s.level, 0);
  setenv("MSA_TEST_TUNING_MODE", "1", 1);
  setenv("MSA_TEST_TUNING_LEVEL", "2", 1);
  s = tuning_from_env(knobs());
  EXPECT_EQ(s.mode, 1);
  EXPECT_EQ(s.level, 2);
  unsetenv("MSA_TEST_TUNING_MODE");
  unsetenv("MSA_TEST_TUNING_LEVEL");
}

TEST(Tuning, BadEnvironmentNamesTheVariable) {
  setenv("MSA_TEST_TUNING_LEVEL", "3", 1);
  try {
    (void)tuning_from_env(knobs());
    FAIL() << "no error for a value out of range";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MSA_TEST_TUNING_LEVEL"), std::string::npos) << e.what();
  }
  unsetenv("MSA_TEST_TUNING_LEVEL");
}

TEST(Tuning, HooksAreNotReadFromTheEnvironment) {
  setenv("hook", "5", 1);
  EXPECT_EQ(tuning_from_env(knobs()).hook, 0);
  unsetenv("hook");
}

TEST(Tuning, SetByNameAndList) {
  Settings s = tuning_from_env(knobs());
  set_tuning_knob(s, knobs(), "dev:0", "hook", "7");
  set_tuning_knob(s, knobs(), "dev:0", "mode", "slow");
  EXPECT_EQ(s.hook, 7);
  EXPECT_EQ(s.mode, 0);
  const auto list = list_tuning(s, knobs());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "mode");
  EXPECT_EQ(list[0].shown, "slow");
  EXPECT_EQ(list[0].dflt, 1);
  EXPECT_EQ(list[0].env, "MSA_TEST_TUNING_MODE");
  EXPECT_EQ(list[2].shown, "7");
  EXPECT_EQ(list[2].env, "");
}

TEST(Tuning, SetRejectsUnknownKnobsAndBadValues) {
  Settings s{};
  EXPECT_THROW(set_tuning_knob(s, knobs(), "dev:0", "nope", "1"), ArgError);
  EXPECT_THROW(set_tuning_knob(s, knobs(), "dev:0", "hook", "9"), ArgError);
  EXPECT_THROW(set_tuning_knob(s, knobs(), "dev:0", "mode", "medium"), ArgError);
  EXPECT_THROW(set_tuning_knob(s, knobs(), "dev:0", "level", ""), ArgError);
  try {
    set_tuning_knob(s, knobs(), "dev:0", "nope", "1");
  } catch (const ArgError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'nope'"), std::string::npos) << m;
    EXPECT_NE(m.find("mode, level, hook"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace msa::hal
