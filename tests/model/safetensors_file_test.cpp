#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "model/safetensors.h"
#include "model_test_files.h"

namespace nanovllm {
namespace {

using testing::make_tensor;
using testing::TempDir;
using testing::write_file;
using testing::write_raw_safetensors;
using testing::write_safetensors;

template <typename T>
std::vector<T> values_of(const SafetensorsTensor& tensor) {
  std::vector<T> values(tensor.nbytes / sizeof(T));
  std::memcpy(values.data(), tensor.data, tensor.nbytes);
  return values;
}

TEST(SafetensorsFile, ReadsEveryAcceptedDtype) {
  TempDir dir;
  const std::vector<float> floats = {1.5f, -2.25f, 0.0f, 1e-3f, 65504.0f, -1e30f};
  int32_t ints32[] = {7, -8, 2147483647};
  int64_t ints64[] = {int64_t{1} << 40, -1};
  std::vector<testing::TensorData> tensors = {
      make_tensor("a.f32", DType::kF32, {2, 3}, floats),
      make_tensor("b.f16", DType::kF16, {3, 2}, floats),
      make_tensor("c.bf16", DType::kBF16, {6}, floats),
      {"d.i32", "I32", {3}, std::string(reinterpret_cast<char*>(ints32), sizeof(ints32))},
      {"e.i64", "I64", {1, 2}, std::string(reinterpret_cast<char*>(ints64), sizeof(ints64))},
  };
  write_safetensors(dir / "x.safetensors", tensors, {{"format", "pt"}});
  const SafetensorsFile file(dir / "x.safetensors");

  EXPECT_EQ(file.tensors().size(), 5u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const SafetensorsTensor& a = *file.find("a.f32");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.file, dir / "x.safetensors");
  EXPECT_EQ(values_of<float>(a), floats);

  const SafetensorsTensor& b = *file.find("b.f16");
  EXPECT_EQ(b.dtype, DType::kF16);
  const std::vector<uint16_t> half = values_of<uint16_t>(b);
  for (size_t i = 0; i < floats.size(); ++i) {
    EXPECT_EQ(fp16_to_float(half[i]), testing::round_to(DType::kF16, floats[i]));
  }
  const SafetensorsTensor& c = *file.find("c.bf16");
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.nbytes, 12u);

  EXPECT_EQ(file.find("d.i32")->dtype, DType::kI32);
  EXPECT_EQ(values_of<int32_t>(*file.find("d.i32")), (std::vector<int32_t>{7, -8, 2147483647}));
  EXPECT_EQ(values_of<int64_t>(*file.find("e.i64")), (std::vector<int64_t>{int64_t{1} << 40, -1}));
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(SafetensorsFile, ScalarsEmptyTensorsAndUnpaddedHeaders) {
  TempDir dir;
  // Header of odd length (no padding): the data section starts unaligned.
  const std::string header = R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                             R"("e":{"dtype":"BF16","shape":[0,5],"data_offsets":[4,4]},)"
                             R"("v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  ASSERT_NE(header.size() % 4, 0u);
  const std::string data = testing::encode_floats({3.0f, -1.0f, 0.5f}, DType::kF32);
  write_raw_safetensors(dir / "x.safetensors", header, data);
  const SafetensorsFile file(dir / "x.safetensors");
  EXPECT_TRUE(file.find("s")->shape.empty());
  EXPECT_EQ(file.find("s")->numel(), 1);
  EXPECT_EQ(values_of<float>(*file.find("s")), std::vector<float>{3.0f});
  EXPECT_EQ(file.find("e")->numel(), 0);
  EXPECT_EQ(file.find("e")->nbytes, 0u);
  EXPECT_EQ(values_of<float>(*file.find("v")), (std::vector<float>{-1.0f, 0.5f}));
  EXPECT_TRUE(file.metadata().empty());
}

TEST(SafetensorsFile, EmptyHeaderObjectIsAnEmptyFile) {
  TempDir dir;
  write_raw_safetensors(dir / "x.safetensors", "{}      ", "");
  EXPECT_TRUE(SafetensorsFile(dir / "x.safetensors").tensors().empty());
}

// A header of one tensor entry, for the malformed-entry cases below; 8 bytes of data.
std::string one_tensor(const std::string& entry) {
  return R"({"w":)" + entry + "}";
}

struct Malformed {
  std::string label;
  std::string header;
  std::string data;
  std::vector<std::string> message_parts;
};
void PrintTo(const Malformed& value, std::ostream* os) {
  *os << value.label;
}

class SafetensorsFileRejects : public ::testing::TestWithParam<Malformed> {};

TEST_P(SafetensorsFileRejects, NamingFileAndProblem) {
  TempDir dir;
  write_raw_safetensors(dir / "bad.safetensors", GetParam().header, GetParam().data);
  std::vector<std::string> parts = GetParam().message_parts;
  parts.push_back((dir / "bad.safetensors").string());
  const std::string message =
      testing::error_message([&] { SafetensorsFile file(dir / "bad.safetensors"); });
  EXPECT_TRUE(testing::contains_all(message, parts)) << message;
}

const std::string kEightBytes(8, '\0');

INSTANTIATE_TEST_SUITE_P(
    Header, SafetensorsFileRejects,
    ::testing::Values(
        Malformed{"EmptyHeader", "", "", {"invalid JSON"}},
        Malformed{"NotJson", "{\"w\": ", "", {"invalid JSON"}},
        Malformed{"TrailingGarbage", "{} x", "", {"invalid JSON"}},
        Malformed{"InvalidUtf8", "{\"w\xff\": 1}", "", {"invalid JSON"}},
        Malformed{"Array", "[1, 2]", "", {"JSON object"}},
        Malformed{"DuplicateTensor",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  kEightBytes,
                  {"\"w\"", "twice"}},
        Malformed{"MetadataNotObject", R"({"__metadata__": 3})", "", {"__metadata__"}},
        Malformed{"MetadataNotString",
                  R"({"__metadata__": {"format": 1}})",
                  "",
                  {"__metadata__", "'format'", "string"}},
        Malformed{"EntryNotObject", one_tensor("[0, 4]"), kEightBytes, {"'w'", "object"}},
        Malformed{"MissingDtype",
                  one_tensor(R"({"shape":[2],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "missing 'dtype'"}},
        Malformed{"MissingShape",
                  one_tensor(R"({"dtype":"F32","data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "missing 'shape'"}},
        Malformed{"MissingOffsets",
                  one_tensor(R"({"dtype":"F32","shape":[2]})"),
                  kEightBytes,
                  {"'w'", "missing 'data_offsets'"}},
        Malformed{"UnknownKey",
                  one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"),
                  kEightBytes,
                  {"'w'", "unexpected key 'x'"}},
        Malformed{"DtypeF64",
                  one_tensor(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "unsupported dtype 'F64'"}},
        Malformed{"DtypeI8",
                  one_tensor(R"({"dtype":"I8","shape":[8],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "unsupported dtype 'I8'"}},
        Malformed{"DtypeFp8",
                  one_tensor(R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "unsupported dtype 'F8_E4M3'"}},
        Malformed{"DtypeBool",
                  one_tensor(R"({"dtype":"BOOL","shape":[8],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "unsupported dtype 'BOOL'"}},
        Malformed{"DtypeNotString",
                  one_tensor(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "dtype"}},
        Malformed{"ShapeNegative",
                  one_tensor(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "shape", "[-2]"}},
        Malformed{"ShapeFraction",
                  one_tensor(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "shape"}},
        Malformed{"ShapeNotList",
                  one_tensor(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "shape must be a list"}},
        Malformed{"ShapeOverflows",
                  one_tensor(R"({"dtype":"F32","shape":[4294967296,4294967296],)"
                             R"("data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "too many elements"}},
        Malformed{"ShapeBytesOverflow",
                  one_tensor(R"({"dtype":"F32","shape":[4611686018427387904],)"
                             R"("data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "too large"}},
        Malformed{"OffsetsOneNumber",
                  one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8]})"),
                  kEightBytes,
                  {"'w'", "data_offsets must be [begin, end]"}},
        Malformed{"OffsetsNegative",
                  one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"),
                  kEightBytes,
                  {"'w'", "data_offsets must be [begin, end]"}},
        Malformed{"OffsetsFraction",
                  one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})"),
                  kEightBytes,
                  {"'w'", "data_offsets must be [begin, end]"}},
        Malformed{"BeginAfterEnd",
                  one_tensor(R"({"dtype":"F32","shape":[0],"data_offsets":[8,0]})"),
                  kEightBytes,
                  {"'w'", "[8, 0]", "begin after end"}},
        Malformed{"EndPastData",
                  one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})"),
                  kEightBytes,
                  {"'w'", "[4, 12]", "past the data section (8 bytes)"}},
        Malformed{"EndHugeNoWrap",
                  one_tensor(R"({"dtype":"F32","shape":[0],)"
                             R"("data_offsets":[18446744073709551615,18446744073709551615]})"),
                  kEightBytes,
                  {"'w'", "past the data section"}},
        Malformed{"TooFewBytes",
                  one_tensor(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "hold 8 bytes", "[3] needs 12"}},
        Malformed{"TooManyBytes",
                  one_tensor(R"({"dtype":"BF16","shape":[2],"data_offsets":[0,8]})"),
                  kEightBytes,
                  {"'w'", "hold 8 bytes", "needs 4"}},
        Malformed{"Overlap",
                  R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  kEightBytes,
                  {"'a'", "'b'", "overlap"}}),
    [](const auto& info) { return info.param.label; });

TEST(SafetensorsFile, RejectsBrokenFraming) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  auto open = [&] { SafetensorsFile file(path); };

  EXPECT_ERROR(open(), path.string(), "cannot open");
  write_file(path, "");
  EXPECT_ERROR(open(), path.string(), "too short", "0 bytes");
  write_file(path, std::string("\x02\0\0\0\0\0\0", 7));
  EXPECT_ERROR(open(), path.string(), "too short", "7 bytes");
  // The length field promises more header than the file holds.
  write_raw_safetensors(path, 100, "{}", "");
  EXPECT_ERROR(open(), path.string(), "header length 100 exceeds the 2 bytes");
  // A length near 2^64 must not wrap around when added to the 8-byte prefix.
  write_raw_safetensors(path, ~uint64_t{0} - 4, "{}", "");
  EXPECT_ERROR(open(), path.string(), "header length 18446744073709551611 exceeds");
  std::filesystem::create_directory(dir / "dir.safetensors");
  EXPECT_ERROR(SafetensorsFile(dir / "dir.safetensors"), "dir.safetensors", "not a regular file");
}

// Every truncation and many random byte corruptions of a valid file: each either opens or is an
// Error naming the file (run under the sanitizers to see that nothing reads out of bounds).
TEST(SafetensorsFile, CorruptionIsAnErrorNeverACrash) {
  TempDir dir;
  const auto good = dir / "good.safetensors";
  write_safetensors(good,
                    {make_tensor("a", DType::kBF16, {2, 3}, {1, 2, 3, 4, 5, 6}),
                     make_tensor("b", DType::kF32, {4}, {1, 2, 3, 4})},
                    {{"format", "pt"}});
  std::ifstream stream(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(stream)), {});
  const auto bad = dir / "bad.safetensors";
  auto try_open = [&](const std::string& contents) {
    write_file(bad, contents);
    const std::string message = testing::error_message([&] { SafetensorsFile file(bad); });
    if (message != "<no error>") {
      ASSERT_NE(message.find(bad.string()), std::string::npos) << message;
    }
  };
  for (size_t length = 0; length < bytes.size(); ++length) try_open(bytes.substr(0, length));
  std::mt19937 generator(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string corrupted = bytes;
    const int flips = 1 + trial % 3;
    for (int f = 0; f < flips; ++f) {
      corrupted[generator() % corrupted.size()] = static_cast<char>(generator() & 0xff);
    }
    try_open(corrupted);
  }
}

TEST(SafetensorsFile, ParsesDtypeNames) {
  EXPECT_EQ(parse_safetensors_dtype("BF16"), DType::kBF16);
  EXPECT_EQ(parse_safetensors_dtype("F16"), DType::kF16);
  EXPECT_EQ(parse_safetensors_dtype("F32"), DType::kF32);
  EXPECT_EQ(parse_safetensors_dtype("I32"), DType::kI32);
  EXPECT_EQ(parse_safetensors_dtype("I64"), DType::kI64);
  EXPECT_FALSE(parse_safetensors_dtype("bf16").has_value());
  EXPECT_FALSE(parse_safetensors_dtype("F64").has_value());
}

}  // namespace
}  // namespace nanovllm
