// Loading tokenizer.json and tokenizer_config.json: clear errors for malformed or unsupported
// files, and what the config adds (special tokens, add_bos_token, chat templates).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "test_files.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::ScratchDir;

// A small valid byte-level BPE tokenizer.json.
json base_tokenizer() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 5, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 6, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null,
              "continuing_subword_prefix": null, "end_of_word_suffix": null,
              "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "c": 4},
              "merges": ["a b"]}
  })");
}

// Loads the tokenizer.json (and config, if given) and returns the error message, or "" if
// loading succeeded.
std::string load_error(const json& tokenizer, const std::optional<json>& config = std::nullopt) {
  ScratchDir dir;
  dir.write("tokenizer.json", tokenizer.dump());
  if (config) dir.write("tokenizer_config.json", config->dump());
  try {
    Tokenizer::from_dir(dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const json& tokenizer, std::initializer_list<std::string_view> parts) {
  const std::string message = load_error(tokenizer);
  ASSERT_FALSE(message.empty()) << "expected an error mentioning " << *parts.begin();
  EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
  for (const std::string_view part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(TokenizerFiles, BaseTokenizerLoadsAndWorks) {
  ScratchDir dir;
  dir.write("tokenizer.json", base_tokenizer().dump());
  const Tokenizer t = Tokenizer::from_dir(dir.path());
  EXPECT_EQ(t.encode("ab c<s>"), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(t.decode(std::vector<int>{2, 3, 4, 5}), "ab c<s>");
  EXPECT_EQ(t.vocab_size(), 7);
  EXPECT_EQ(t.eos_token(), std::nullopt);
  EXPECT_EQ(t.chat_template(), std::nullopt);
}

TEST(TokenizerFiles, MissingOrUnparsableFilesAreNamed) {
  ScratchDir empty;
  try {
    Tokenizer::from_dir(empty.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
  ScratchDir dir;
  dir.write("tokenizer.json", "{\"model\": {\"vocab\": ");
  try {
    Tokenizer::from_dir(dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json: invalid JSON"), std::string::npos)
        << e.what();
  }
  expect_error(json::array(), {"top level", "expected an object"});
  json no_model = base_tokenizer();
  no_model.erase("model");
  expect_error(no_model, {"missing field 'model'"});
}

TEST(TokenizerFiles, UnsupportedComponentsAreNamed) {
  json t = base_tokenizer();
  t["model"]["type"] = "WordPiece";
  expect_error(t, {"model", "unsupported model type 'WordPiece'"});

  t = base_tokenizer();
  t["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "NFC"}, {"type": "Lowercase"}]})");
  expect_error(t, {"normalizer.normalizers[1]", "unsupported normalizer type 'Lowercase'"});

  t = base_tokenizer();
  t["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "_"})");
  expect_error(t, {"unsupported pre_tokenizer type 'Metaspace'"});

  t = base_tokenizer();
  t["decoder"] = json::parse(R"({"type": "WordPiece", "prefix": "##"})");
  expect_error(t, {"unsupported decoder type 'WordPiece'"});

  t = base_tokenizer();
  t["post_processor"] = json::parse(R"({"type": "Magic"})");
  expect_error(t, {"unsupported post_processor type 'Magic'"});

  t = base_tokenizer();
  t["model"]["byte_fallback"] = true;
  expect_error(t, {"byte_fallback is not supported"});

  t = base_tokenizer();
  t["model"]["dropout"] = 0.1;
  expect_error(t, {"dropout is not supported"});

  t = base_tokenizer();
  t["model"]["continuing_subword_prefix"] = "##";
  expect_error(t, {"continuing_subword_prefix"});

  t = base_tokenizer();
  t["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
      {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": false}]})");
  expect_error(t, {"only ByteLevel may come last"});
}

TEST(TokenizerFiles, MalformedModelsAreNamed) {
  json t = base_tokenizer();
  t["model"]["merges"] = json::array({"a b c"});
  expect_error(t, {"model.merges[0]", "not two tokens separated by one space"});

  t = base_tokenizer();
  t["model"]["merges"] = json::array({json::array({1, 2})});
  expect_error(t, {"model.merges[0]", "[left, right] pair"});

  t = base_tokenizer();
  t["model"]["merges"] = json::array({"a b", "b x"});
  expect_error(t, {"merges[1]", "token 'x' is not in the vocabulary"});

  t = base_tokenizer();
  t["model"]["merges"] = json::array({"b c"});  // "bc" is not in the vocabulary
  expect_error(t, {"token 'bc' is not in the vocabulary"});

  t = base_tokenizer();
  t["model"]["vocab"]["d"] = "seven";
  expect_error(t, {"model.vocab[\"d\"]", "expected an integer"});

  t = base_tokenizer();
  t["model"]["vocab"]["d"] = 1;
  expect_error(t, {"id 1 is used by both"});

  t = base_tokenizer();
  t["model"]["unk_token"] = "<unk>";
  expect_error(t, {"unk_token '<unk>' is not in the vocabulary"});

  t = base_tokenizer();
  t["added_tokens"][0].erase("content");
  expect_error(t, {"added_tokens[0]", "missing field 'content'"});

  t = base_tokenizer();
  t["pre_tokenizer"] = json::parse(
      R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})");
  expect_error(t, {"pre_tokenizer", "(unclosed"});

  t = base_tokenizer();
  t["pre_tokenizer"] =
      json::parse(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})");
  expect_error(t, {"unknown split behavior 'Sideways'"});

  t = base_tokenizer();
  t["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {}})");
  expect_error(t, {"special token '<x>' is not defined"});

  // Found by fuzzing: encode() would hand out an id the tokenizer has no token for.
  t = base_tokenizer();
  t["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {"<x>": {"id": "<x>", "ids": [9], "tokens": ["<x>"]}}})");
  expect_error(t, {"post_processor", "adds token id 9, which no token has"});
}

TEST(TokenizerFiles, MalformedConfigIsNamed) {
  const auto config_error = [](const json& config) { return load_error(base_tokenizer(), config); };
  std::string m = config_error(json{{"chat_template", 3}});
  EXPECT_NE(m.find("tokenizer_config.json: chat_template"), std::string::npos) << m;
  m = config_error(json{{"eos_token", 3}});
  EXPECT_NE(m.find("eos_token"), std::string::npos) << m;
  m = config_error(json{{"add_bos_token", "yes"}});
  EXPECT_NE(m.find("'add_bos_token' must be true or false"), std::string::npos) << m;
  m = config_error(json{{"added_tokens_decoder", {{"abc", {{"content", "x"}}}}}});
  EXPECT_NE(m.find("key is not a token id"), std::string::npos) << m;
  m = config_error(json{{"added_tokens_decoder", {{"5", {{"content", "<t>"}}}}}});
  EXPECT_NE(m.find("differs from tokenizer.json's '<s>'"), std::string::npos) << m;
}

TEST(TokenizerFiles, ConfigNamesSpecialTokensAndPicksTheDefaultChatTemplate) {
  ScratchDir dir;
  dir.write("tokenizer.json", base_tokenizer().dump());
  dir.write("tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
    "added_tokens_decoder": {"9": {"content": "<extra>", "special": true}}})");
  const Tokenizer t = Tokenizer::from_dir(dir.path());
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(t.bos_token_id(), 5);
  EXPECT_EQ(t.eos_token_id(), 6);
  EXPECT_EQ(t.chat_template(), "D");
  // Tokens only the config lists are added.
  EXPECT_EQ(t.token_to_id("<extra>"), 9);
  EXPECT_EQ(t.vocab_size(), 10);
  EXPECT_EQ(t.encode("a<extra>"), (std::vector<int>{0, 9}));
  EXPECT_EQ(t.decode(std::vector<int>{0, 9}, true), "a");
}

TEST(TokenizerFiles, ChatTemplateFileIsUsedWhenTheConfigHasNone) {
  ScratchDir dir;
  dir.write("tokenizer.json", base_tokenizer().dump());
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  dir.write("chat_template.jinja", "{{ messages }}");
  EXPECT_EQ(Tokenizer::from_dir(dir.path()).chat_template(), "{{ messages }}");
  dir.write("tokenizer_config.json", R"({"chat_template": "inline"})");
  EXPECT_EQ(Tokenizer::from_dir(dir.path()).chat_template(), "inline");
}

TEST(TokenizerFiles, AddSpecialTokensFollowsThePostProcessorOnly) {
  json t = base_tokenizer();
  t["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]},
                                     "</s>": {"id": "</s>", "ids": [6], "tokens": ["</s>"]}}})");
  ScratchDir dir;
  dir.write("tokenizer.json", t.dump());
  EXPECT_EQ(Tokenizer::from_dir(dir.path()).encode("ab", true), (std::vector<int>{5, 2, 6}));
  EXPECT_EQ(Tokenizer::from_dir(dir.path()).encode("ab", false), (std::vector<int>{2}));
  // The config's flags are reported but, as in transformers 5, do not change encoding
  // (test_tokenizer_differential.py checks this against transformers).
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>",
                                         "add_bos_token": false, "add_eos_token": true})");
  const Tokenizer with_config = Tokenizer::from_dir(dir.path());
  EXPECT_EQ(with_config.add_bos_token(), false);
  EXPECT_EQ(with_config.add_eos_token(), true);
  EXPECT_EQ(with_config.encode("ab", true), (std::vector<int>{5, 2, 6}));
  // Without a post-processor nothing is added.
  json plain = base_tokenizer();
  dir.write("tokenizer.json", plain.dump());
  EXPECT_EQ(Tokenizer::from_dir(dir.path()).encode("ab", true), (std::vector<int>{2}));
}

}  // namespace
}  // namespace nanovllm
