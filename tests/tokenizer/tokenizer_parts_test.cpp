// The tokenizer's parts, each against a reference nobody here wrote or a naive version:
// UTF-8 handling, the Oniguruma -> PCRE2 translation, NFC fast paths, BPE merge order, split
// behaviors (Hugging Face's documented example) and added-token matching options.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/check.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/onig_translate.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace nanovllm {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  utf8::append_lossy(out, bytes);
  return out;
}

TEST(Utf8, LossyConversionReplacesMaximalSubparts) {
  // Expected values from Python's bytes.decode("utf-8", "replace").
  EXPECT_EQ(lossy("abc"), "abc");
  EXPECT_EQ(lossy("\xE4\xB8\xAD"), "中");
  EXPECT_EQ(lossy("\xE4\xB8"), "\uFFFD");  // truncated: one replacement
  EXPECT_EQ(lossy("\xE4\xB8x"), "\uFFFDx");
  EXPECT_EQ(lossy("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(lossy("\xC0\xAF"), "\uFFFD\uFFFD");                      // overlong lead
  EXPECT_EQ(lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");            // surrogate
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");  // > U+10FFFF
  EXPECT_EQ(lossy("\xE0\x80\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(lossy("\x80\xBF"), "\uFFFD\uFFFD");
  EXPECT_EQ(lossy("\xFF\xFEz"), "\uFFFD\uFFFDz");
  EXPECT_EQ(lossy("\xF1\x80\x80\xE1\x80\xC2"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(lossy(std::string("\x00\x7F", 2)), std::string("\x00\x7F", 2));
}

TEST(Utf8, CompletePrefixStopsBeforeATruncatedCharacter) {
  std::string out;
  EXPECT_EQ(utf8::append_lossy_complete(out, "ab\xE4\xB8"), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(utf8::append_lossy_complete(out, "\xE4\xB8\xAD\xF0"), 3u);
  EXPECT_EQ(out, "中");
  EXPECT_EQ(utf8::find_invalid("ok\xC3\xA9"), std::nullopt);
  EXPECT_EQ(utf8::find_invalid("ok\xC3"), 2u);
}

bool full_match(const std::string& onig_pattern, const std::string& text) {
  const Regex re("\\A(?:" + translate_onig_pattern(onig_pattern) + ")\\z");
  std::size_t b = 0, e = 0;
  return re.search(text, 0, &b, &e);
}

TEST(OnigTranslation, ShorthandClassesHaveOnigurumaMeanings) {
  // \s is White_Space: not U+180E (PCRE2's \s would take it) nor U+200B.
  EXPECT_TRUE(full_match(R"(\s+)", " \t\n\r\x0B\x0C\u0085\u00A0\u2000\u2028\u2029\u3000"));
  EXPECT_FALSE(full_match(R"(\s)", "\u180E"));
  EXPECT_FALSE(full_match(R"(\s)", "\u200B"));
  EXPECT_TRUE(full_match(R"(\S)", "\u180E"));
  EXPECT_TRUE(full_match(R"([^\s\p{L}])", "\u180E"));
  // \w takes marks and all numbers; \h is a hex digit; \d decimal digits only.
  EXPECT_TRUE(full_match(R"(\w+)", "a\u0301_\u00B2\u0663"));
  EXPECT_TRUE(full_match(R"(\h+)", "09afAF"));
  EXPECT_FALSE(full_match(R"(\h)", " "));
  EXPECT_TRUE(full_match(R"(\d+)", "12\u0663"));
  EXPECT_FALSE(full_match(R"(\d)", "\u00B2"));
}

TEST(OnigTranslation, CaseInsensitiveGroupsFoldOnlyAscii) {
  const std::string pattern = "(?i:'s|'ll)";
  EXPECT_TRUE(full_match(pattern, "'S"));
  EXPECT_TRUE(full_match(pattern, "'lL"));
  EXPECT_FALSE(full_match(pattern, "'\u017F"));  // LATIN SMALL LETTER LONG S
  EXPECT_FALSE(full_match("(?i:k)", "\u212A"));  // KELVIN SIGN
  EXPECT_TRUE(full_match("(?i:[a-c]x)", "BX"));
  EXPECT_FALSE(full_match("(?i:a)b", "AB"));  // the flag ends with its group
}

TEST(OnigTranslation, RejectsWhatItCannotTranslate) {
  EXPECT_THROW(translate_onig_pattern(R"([^\S])"), Error);
  EXPECT_THROW(translate_onig_pattern("(?i:\u00E9)"), Error);
  EXPECT_THROW(translate_onig_pattern("[a[b]]"), Error);
  EXPECT_THROW(translate_onig_pattern("(?x) a"), Error);
  EXPECT_THROW(translate_onig_pattern(R"(\G)"), Error);
  EXPECT_THROW(translate_onig_pattern("(a"), Error);
}

TEST(Normalizer, NfcFastPathEqualsPlainUtf8proc) {
  // Random strings dense in combining marks, Hangul jamo and composable letters.
  const std::vector<std::string> alphabet = {
      "a",      "e",      "A",      " ",      "x",      "\u00E9",     "\u0301", "\u0300",
      "\u0308", "\u0323", "\u0327", "\u0345", "\u031B", "\u1100",     "\u1161", "\u11A8",
      "\uAC00", "\uAC01", "\u0B47", "\u0B3E", "\u0CC6", "\u0CD5",     "\u3099", "\u304B",
      "\uFB01", "\u2126", "\u212B", "\u0F73", "中",     "\U0001F600", "\u05B7", "\u0591",
      "\u1E0B", "\u0DD9", "\u0DCF", "\u1B05", "\u1B35"};
  std::mt19937 rng(3);
  const Normalizer nfc({NormalizationForm::kNFC});
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(nfc.normalize(text), normalize_reference(text, NormalizationForm::kNFC)) << text;
  }
}

TEST(Normalizer, SequenceAppliesFormsInOrder) {
  const Normalizer nfd_then_nfkc({NormalizationForm::kNFD, NormalizationForm::kNFKC});
  EXPECT_EQ(nfd_then_nfkc.normalize("\uFB01 e\u0301"), "fi \u00E9");
  EXPECT_EQ(Normalizer({NormalizationForm::kNFD}).normalize("\u00E9"), "e\u0301");
  EXPECT_EQ(Normalizer().normalize("e\u0301"), "e\u0301");
}

// Straightforward BPE: merge the lowest-ranked adjacent pair, leftmost first, until none.
std::vector<int> naive_merge(std::vector<int> symbols,
                             const std::map<std::pair<int, int>, std::pair<int, int>>& merges) {
  while (true) {
    int best = -1, best_rank = INT32_MAX;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges.find({symbols[i], symbols[i + 1]});
      if (it != merges.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best = static_cast<int>(i);
      }
    }
    if (best < 0) return symbols;
    symbols[best] = merges.at({symbols[best], symbols[best + 1]}).second;
    symbols.erase(symbols.begin() + best + 1);
  }
}

TEST(BpeModel, MergeOrderMatchesNaiveBpeOnShortAndLongWords) {
  std::mt19937 rng(11);
  // Random merges over a four-letter alphabet; merged strings join the vocabulary.
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  std::map<std::string, int> ids = {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}};
  std::vector<std::pair<std::string, std::string>> merges;
  std::map<std::pair<int, int>, std::pair<int, int>> naive;
  for (int i = 0; i < 120; ++i) {
    const std::string l = tokens[rng() % tokens.size()];
    const std::string r = tokens[rng() % tokens.size()];
    if (l.size() + r.size() > 8) continue;
    const std::string joined = l + r;
    if (!ids.contains(joined)) {
      ids[joined] = static_cast<int>(tokens.size());
      tokens.push_back(joined);
    }
    merges.emplace_back(l, r);
    naive[{ids[l], ids[r]}] = {static_cast<int>(merges.size() - 1), ids[joined]};  // last wins
  }
  std::vector<std::pair<std::string, int>> vocab(ids.begin(), ids.end());
  const BpeModel model(vocab, merges, BpeOptions{});
  for (int round = 0; round < 3000; ++round) {
    const int n = 1 + static_cast<int>(rng() % (round % 10 == 0 ? 400 : 30));
    std::vector<int> symbols(n);
    std::string word;
    for (int& s : symbols) {
      s = static_cast<int>(rng() % 4);
      word += tokens[s];
    }
    std::vector<int> merged = symbols;
    model.merge(merged);
    ASSERT_EQ(merged, naive_merge(symbols, naive)) << word;
    std::vector<int> encoded;
    model.encode_word(word, encoded);
    ASSERT_EQ(encoded, merged) << word;
  }
}

TEST(BpeModel, UnknownSymbolsBecomeUnkOrAreDropped) {
  const std::vector<std::pair<std::string, std::string>> no_merges;
  BpeOptions fused;
  fused.unk_token = "<unk>";
  fused.fuse_unk = true;
  const BpeModel with_unk({{"<unk>", 0}, {"a", 1}}, no_merges, fused);
  std::vector<int> out;
  with_unk.encode_word("a\u00E9\u00E9a\u00E9", out);
  EXPECT_EQ(out, (std::vector<int>{1, 0, 1, 0}));
  BpeOptions unfused = fused;
  unfused.fuse_unk = false;
  out.clear();
  BpeModel({{"<unk>", 0}, {"a", 1}}, no_merges, unfused).encode_word("a\u00E9\u00E9", out);
  EXPECT_EQ(out, (std::vector<int>{1, 0, 0}));
  out.clear();
  BpeModel({{"a", 1}}, no_merges, BpeOptions{}).encode_word("a\u00E9a", out);
  EXPECT_EQ(out, (std::vector<int>{1, 1}));
}

std::vector<std::string> split(PreTokenizer& p, std::string_view text) {
  std::vector<std::string> pieces;
  p.split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

TEST(PreTokenizer, SplitBehaviorsMatchHuggingFaceDocumentation) {
  // The example in the documentation of tokenizers' NormalizedString::split.
  using V = std::vector<std::string>;
  const auto run = [](SplitBehavior behavior, bool invert = false) {
    PreTokenizer p;
    p.add_literal_split("-", behavior, invert);
    return split(p, "the-final--countdown");
  };
  EXPECT_EQ(run(SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run(SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

TEST(PreTokenizer, ByteLevelAddsPrefixSpaceToEveryPiece) {
  PreTokenizer p;
  p.add_literal_split("|", SplitBehavior::kRemoved, false);
  p.set_byte_level(/*add_prefix_space=*/true, /*use_regex=*/true);
  EXPECT_EQ(split(p, "Hi there| you's|  x"),
            (std::vector<std::string>{" Hi", " there", " you", "'s", " ", " x"}));
}

TEST(AddedTokens, OptionsBehaveAsInHuggingFace) {
  // Mirrors tokenizers' own test (added_vocabulary.rs, test_lstrip_unicode_space and
  // test_single_word_is_correct).
  AddedToken mask{7, "<mask>", true, true, true, false, false};
  const AddedTokenMatcher m({mask}, false, Normalizer());
  std::vector<TextSegment> segments;
  const std::string text = "Hi <mask> there\t<mask>\t<mask>\u2000";
  m.split(text, segments);
  std::vector<std::pair<std::string, int>> got;
  for (const TextSegment& s : segments)
    got.emplace_back(text.substr(s.begin, s.end - s.begin), s.id);
  EXPECT_EQ(
      got,
      (std::vector<std::pair<std::string, int>>{
          {"Hi", -1}, {" <mask> ", 7}, {"there", -1}, {"\t<mask>\t", 7}, {"<mask>\u2000", 7}}));

  AddedToken word_only{8, "<mask>", true, false, false, false, false};
  const AddedTokenMatcher w({word_only}, false, Normalizer());
  const std::string text2 = "<mask> My name <mask> A<mask> <mask>ony <mask>";
  segments.clear();
  w.split(text2, segments);
  std::vector<int> ids;
  for (const TextSegment& s : segments) ids.push_back(s.id);
  EXPECT_EQ(ids, (std::vector<int>{8, -1, 8, -1, 8}));
}

TEST(AddedTokens, LongestMatchWinsAtTheLeftmostPosition) {
  const AddedTokenMatcher m({AddedToken{1, "ab", false, false, false, false, true},
                             AddedToken{2, "abc", false, false, false, false, true},
                             AddedToken{3, "bcd", false, false, false, false, true}},
                            false, Normalizer());
  std::vector<TextSegment> segments;
  m.split("xabcd", segments);
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(segments[1].id, 2);
  EXPECT_EQ(segments[2].id, -1);  // "d": bcd overlaps the earlier match
}

}  // namespace
}  // namespace nanovllm
