// .safetensors round trip and every malformed-file case: each must raise msa::Error
// naming the file and the problem, never crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/safetensors.h"

namespace msa::test {
namespace {

namespace fs = std::filesystem;
using hal::DType;
using hal::HostTensor;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("msa_safetensors_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes raw bytes: an 8-byte little-endian length (default: the header's size),
  // the header text, then `data`.
  std::string raw(const std::string& header, const std::string& data, int64_t len = -1) {
    const std::string p = path("raw.safetensors");
    std::ofstream f(p, std::ios::binary);
    uint64_t n = len < 0 ? header.size() : static_cast<uint64_t>(len);
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
    f << header << data;
    return p;
  }
  // Reading `p` must fail with a message naming the file and containing `what`.
  void expect_bad(const std::string& p, const std::string& what) {
    try {
      hal::read_safetensors(p);
      ADD_FAILURE() << "expected msa::Error containing '" << what << "'";
    } catch (const msa::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  }

  fs::path dir_;
};

HostTensor filled(DType t, std::vector<int64_t> shape, uint8_t seed) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<uint8_t>(seed + 7 * i);
  return h;
}

TEST_F(Safetensors, RoundTripEveryDtypeAndMetadata) {
  std::map<std::string, HostTensor> in;
  in["model.embed_tokens.weight"] = filled(DType::bf16, {5, 3}, 1);
  in["a.f32"] = filled(DType::f32, {2, 3, 4}, 2);
  in["b.f16"] = filled(DType::f16, {7}, 3);
  in["c.i32"] = filled(DType::i32, {1, 1, 1, 2}, 4);
  in["d.fp8"] = filled(DType::fp8_e4m3, {3, 5}, 5);  // odd byte count: later offsets unaligned
  in["e.scalar"] = filled(DType::f32, {}, 6);
  in["f.empty"] = filled(DType::f32, {0, 4}, 7);
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "héllo"}};
  const std::string p = path("rt.safetensors");
  hal::write_safetensors(p, in, meta);

  // Data section starts 8-byte aligned, as the reference writer does.
  std::ifstream f(p, std::ios::binary);
  uint64_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 8);
  EXPECT_EQ(hlen % 8, 0u);

  std::map<std::string, std::string> meta_out;
  auto out = hal::read_safetensors(p, &meta_out);
  EXPECT_EQ(meta_out, meta);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out[name].dtype, t.dtype) << name;
    EXPECT_EQ(out[name].shape, t.shape) << name;
    EXPECT_EQ(out[name].bytes, t.bytes) << name;
  }
}

TEST_F(Safetensors, ReadsHandWrittenFileWithPaddingAndHoles) {
  // Header padded with trailing spaces; one f32 [2] at bytes 8..16 after a hole.
  std::string data(16, '\0');
  const float v[2] = {1.5f, -2.0f};
  std::memcpy(&data[8], v, 8);
  auto p = raw(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"__metadata__":{}}   )", data);
  auto out = hal::read_safetensors(p);
  ASSERT_EQ(out.count("x"), 1u);
  EXPECT_EQ(out["x"].to_f32(), (std::vector<float>{1.5f, -2.0f}));
}

TEST_F(Safetensors, EmptyFileSet) {
  const std::string p = path("empty.safetensors");
  hal::write_safetensors(p, {});
  EXPECT_TRUE(hal::read_safetensors(p).empty());
}

TEST_F(Safetensors, MissingFile) { expect_bad(path("nope.safetensors"), "cannot open"); }

TEST_F(Safetensors, TruncatedBeforeLength) {
  const std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  expect_bad(p, "truncated");
}

TEST_F(Safetensors, HeaderLengthBeyondFile) {
  expect_bad(raw(R"({})", "", 1000), "exceeds the file");
  expect_bad(raw(R"({})", "", INT64_MAX), "exceeds the file");
}

TEST_F(Safetensors, BadJson) {
  expect_bad(raw(R"({"x": {"dtype": "F32", )", ""), "not valid JSON");
  expect_bad(raw(R"([1, 2])", ""), "not a JSON object");
  expect_bad(raw(std::string("{\"a\":\0}", 7), ""), "not valid JSON");
}

TEST_F(Safetensors, UnknownDtype) {
  expect_bad(raw(R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
             "unsupported dtype 'F64'");
  expect_bad(raw(R"({"x":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')), "dtype");
}

TEST_F(Safetensors, NegativeAndNonIntegerDims) {
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
             "negative or non-integer dim");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", std::string(4, '\0')),
             "negative or non-integer dim");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":"2","data_offsets":[0,4]}})", std::string(4, '\0')), "shape");
}

TEST_F(Safetensors, SizeOverflow) {
  expect_bad(
      raw(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", std::string(4, '\0')),
      "overflows");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", std::string(4, '\0')),
             "too large");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", std::string(4, '\0')),
             "overflows");
}

TEST_F(Safetensors, OffsetsOutOfRange) {
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(4, '\0')), "out of range");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", std::string(8, '\0')), "out of range");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", std::string(8, '\0')), "data_offsets");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::string(8, '\0')), "data_offsets");
}

TEST_F(Safetensors, OffsetsNotMatchingShape) {
  expect_bad(raw(R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')), "needs 6");
}

TEST_F(Safetensors, OverlappingTensors) {
  expect_bad(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 std::string(12, '\0')),
             "overlap");
}

TEST_F(Safetensors, BadMetadataAndEntries) {
  expect_bad(raw(R"({"__metadata__":{"k":1}})", ""), "__metadata__");
  expect_bad(raw(R"({"__metadata__":[]})", ""), "__metadata__");
  expect_bad(raw(R"({"x":[1,2]})", ""), "tensor 'x'");
}

TEST_F(Safetensors, WriteRejectsInconsistentTensor) {
  HostTensor t(DType::f32, {2, 2});
  t.bytes.resize(12);
  const std::string p = path("w.safetensors");
  try {
    hal::write_safetensors(p, {{"w", t}});
    ADD_FAILURE() << "expected msa::Error";
  } catch (const msa::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(hal::write_safetensors(path("no_dir/x.safetensors"), {}), msa::Error);
}

// Every truncation of a valid file is either read correctly (never: the data section
// shrinks) or rejected with msa::Error; none may crash.
TEST_F(Safetensors, EveryTruncationIsAnError) {
  const std::string p = path("full.safetensors");
  hal::write_safetensors(p, {{"a", filled(DType::f32, {3}, 1)}, {"b", filled(DType::bf16, {2, 2}, 2)}});
  std::ifstream f(p, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string q = path("cut.safetensors");
  for (size_t n = 0; n < all.size(); ++n) {
    std::ofstream(q, std::ios::binary | std::ios::trunc) << all.substr(0, n);
    EXPECT_THROW(hal::read_safetensors(q), msa::Error) << "length " << n;
  }
}

// A header nesting `depth` arrays inside the shape of tensor "x".
std::string deep_header(int depth) {
  return R"({"x":{"dtype":"F32","data_offsets":[0,4],"shape":)" + std::string(depth, '[') + std::string(depth, ']') +
         "}}";
}

// Deep nesting (100k levels, 200 KB) is rejected while parsing, before anything walks the
// value recursively (a message quoting it would overflow the stack); 64 levels are the bound.
TEST_F(Safetensors, DeepNestingIsRejected) {
  expect_bad(raw(deep_header(100000), std::string(4, '\0')), "deeper than 64 levels");
  expect_bad(raw(deep_header(64), std::string(4, '\0')), "deeper than 64 levels");  // + 3 levels above
  expect_bad(raw(R"({"__metadata__":)" + std::string(100000, '[') + std::string(100000, ']') + "}", ""),
             "deeper than 64 levels");
  expect_bad(raw(deep_header(10), std::string(4, '\0')), "negative or non-integer dim");
}

// Messages quote at most a short excerpt of a value or name.
TEST_F(Safetensors, MessagesAreBounded) {
  std::string shape = "[1";
  for (int i = 0; i < 5000; ++i) shape += ",1";
  shape += ",-1]";
  const std::string long_name(100000, 'n');
  for (const std::string& header : {R"({"x":{"dtype":"F32","data_offsets":[0,4],"shape":)" + shape + "}}",
                                    "{\"" + long_name + R"(":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})"}) {
    const std::string p = raw(header, "");
    expect_bad(p, header.size() > 50000 ? "unsupported dtype" : "has a negative or non-integer dim");
    try {
      hal::read_safetensors(p);
    } catch (const msa::Error& e) {
      EXPECT_LT(std::strlen(e.what()), 400u) << e.what();
    }
  }
}

// A tensor named twice (a json object keeps one value per key, so the last one would win
// silently) and bytes after a NUL (where the parser would stop) are errors.
TEST_F(Safetensors, DuplicateNamesAndNulAreRejected) {
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 std::string(8, '\0')),
             "has the key \"x\" twice");
  expect_bad(raw(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtype":"I32"}})", std::string(4, '\0')),
             "has the key \"dtype\" twice");
  expect_bad(raw(std::string("{}\0\0\0garbage", 12), ""), "NUL byte at offset 2");
  expect_bad(raw(R"({} x)", ""), "not valid JSON");
  // Space padding after the object (the reference writer's alignment) stays valid.
  EXPECT_TRUE(hal::read_safetensors(raw("{}      ", "")).empty());
}

}  // namespace
}  // namespace msa::test
