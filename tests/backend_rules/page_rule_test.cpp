// One page-id rule on every backend with a device here (docs/bad-inputs.md): a
// block_table entry of any block within a sequence's kv_len must be a page id, also
// when sparse attention selects another block; entries past the sequence's last block
// are never read.
#include <gtest/gtest.h>

#include <string>

#include "hal/error.h"
#include "tests/backend_rules/rules_util.h"

namespace {

using namespace msa::test::rules;

TEST(PageRule, BadPageInAnUnselectedBlockIsAnError) {
  ASSERT_FALSE(devices().empty());
  for (const std::string& dev : devices()) {
    Batch b;
    // Sequence 1 (kv_len 9: blocks 0 and 1) selects block 0 only; block 1 names page 99.
    b.table.data<int32_t>()[3] = 99;
    int32_t* idx = b.block_idx.data<int32_t>();
    for (int i = 4; i < 8; i += 2) idx[i] = 0, idx[i + 1] = -1;
    try {
      run(dev, b, /*sparse=*/true);
      ADD_FAILURE() << dev << ": no error for page 99";
    } catch (const msa::Error& e) {
      EXPECT_NE(std::string(e.what()).find("block_table"), std::string::npos) << dev << ": " << e.what();
    }
    // Past the sequence's blocks (kv_len 8: block 1 is not part of it) any value is fine.
    b.kv_len.data<int32_t>()[1] = 8;
    EXPECT_NO_THROW(run(dev, b, true)) << dev;
  }
}

}  // namespace
